#!/usr/bin/env python3
"""Records real gpupool traffic as fuzz seeds.

A TCP proxy between clients and a gpupoold: every connection's client->server bytes are written to
OUT/server_session/<name>-<n> (seeds for server_session_fuzzer) and its server->client bytes to
OUT/client_reply/<name>-<n> (seeds for client_reply_fuzzer). Connections whose recording would be
larger than --max-bytes are cut at that size, wherever it falls (the fuzzers cope with cut frames).

  record_traffic.py --listen 7100 --upstream 127.0.0.1:7000 --out fuzz/corpus --name vector_add
"""
import argparse
import os
import socket
import threading


def pump(src, dst, sink, limit):
    kept = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if kept < limit:
                sink.write(data[: limit - kept])
                kept += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        sink.close()
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="HOST:PORT of gpupoold")
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--max-bytes", type=int, default=256 * 1024)
    args = parser.parse_args()
    host, port = args.upstream.rsplit(":", 1)
    for d in ("server_session", "client_reply"):
        os.makedirs(os.path.join(args.out, d), exist_ok=True)
    listener = socket.create_server(("127.0.0.1", args.listen))
    print("recording on", args.listen, flush=True)
    n = 0
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection((host, int(port)))
        n += 1
        tag = f"{args.name}-{n}"
        up = open(os.path.join(args.out, "server_session", tag), "wb")
        down = open(os.path.join(args.out, "client_reply", tag), "wb")
        threading.Thread(target=pump, args=(client, upstream, up, args.max_bytes), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, down, args.max_bytes), daemon=True).start()


if __name__ == "__main__":
    main()
