#!/usr/bin/env python3
"""Generates docs/compatibility.md: the driver surface, family by family, as the code serves it.

Every base name that cuda.h, cudaProfiler.h and the graphics interop headers declare (cuX, cuX_v2, ... and the _ptds/_ptsz
variants fold into one, as cuGetProcAddress sees them) is one of:
  implemented       the symbol cuGetProcAddress hands out for CUDA_VERSION has a definition in
                    client/*.cc (it may still refuse some arguments, each with a logged reason);
  refused           a row of client/refused_calls.def: the generated entry point returns the
                    row's error and logs the row's reason (a call the pool deliberately does not
                    serve, with the reason a user needs);
  not implemented   the generated stub: CUDA_ERROR_NOT_SUPPORTED, "<name> is not supported".
Families are cuda.h's own doxygen groups (\\defgroup CUDA_X ... @{ ... @}).

  --check            compare with the committed file instead of writing it (CI runs this)
  --library PATH     also read the built libcuda.so.1's dynamic symbols and fail when it lacks
                     an entry point the headers declare, or when its strong definitions differ
                     from what the sources say (the ctest does this)
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import generate_driver_api as surface  # noqa: E402

GROUP_BEGIN = re.compile(r"\\defgroup\s+(CUDA_\w+)\s+(.*)")
DECLARATION = re.compile(r"\bCUresult\s+CUDAAPI\s+(cu\w+)\s*\(")
DEFINITION = re.compile(r"\bCUresult\s+(?:CUDAAPI\s+)?(cu\w+)\s*\(")
# copy_api.cc defines each per-thread-stream twin with GPUPOOL_TWIN(ret, name, twin, ...).
TWIN_DEFINITION = re.compile(r"^GPUPOOL_TWIN\(\s*CUresult,\s*cu\w+,\s*(cu\w+),", re.M)
VERSION_SUFFIX = surface.VERSION_SUFFIX
CURRENT_VERSION = 13000


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


FAMILY_HEADERS = ["cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h"]


def header_families(include_dir):
    """Maps each base name the headers declare to its doxygen group title, and the titles in
    header order. A declaration may break its line after CUDAAPI, so whole texts are searched."""
    family_of, order, header_of = {}, [], {}
    for header in FAMILY_HEADERS:
        text = read(os.path.join(include_dir, header))
        for begin in GROUP_BEGIN.finditer(text):
            opened = text.find("@{", begin.end())
            closed = text.find("@}", opened)
            title = begin.group(2).strip()
            for declared in DECLARATION.finditer(text, opened, closed):
                family_of.setdefault(VERSION_SUFFIX.sub("", declared.group(1)), title)
                header_of.setdefault(title, header)
            if title not in order:
                order.append(title)
        # Some names are renamed to newer ABIs with a different base (#define cuGraphInstantiate
        # cuGraphInstantiateWithFlags): the new base belongs to the old one's family.
        for rename in re.finditer(r"#define\s+(cu\w+)\s+(cu\w+)", text):
            old, new = (VERSION_SUFFIX.sub("", name) for name in rename.groups())
            if old in family_of:
                family_of.setdefault(new, family_of[old])
    return family_of, order, header_of


def balanced_end(text, open_index):
    return surface.balanced_parens(text, open_index)


def defined_in_sources(exported):
    """Exported names that some client/*.cc defines (a body follows the parameter list)."""
    defined = {}
    client_dir = os.path.join(REPO, "client")
    for name in sorted(os.listdir(client_dir)):
        if not name.endswith(".cc"):
            continue
        text = read(os.path.join(client_dir, name))
        for match in DEFINITION.finditer(text):
            symbol = match.group(1)
            if symbol not in exported:
                continue
            end = balanced_end(text, match.end() - 1)
            if text[end:].lstrip().startswith("{"):
                defined.setdefault(symbol, f"client/{name}")
        for match in TWIN_DEFINITION.finditer(text):
            if match.group(1) in exported:
                defined.setdefault(match.group(1), f"client/{name}")
    return defined


def refused_calls(exported):
    path = os.path.join(REPO, "client", "refused_calls.def")
    rows = surface.read_refused_calls(path)
    bases = {VERSION_SUFFIX.sub("", symbol) for symbol in exported}
    for base in rows:
        if base not in bases:
            sys.exit(f"client/refused_calls.def: {base} is not a driver entry point")
    return rows


def dynamic_symbols_of(library):
    """The cu* dynamic symbols the library defines: (all of them, the strong ones). Generated
    stubs and refusals are weak (nm type W), definitions in client/*.cc strong (T)."""
    result = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True,
                            text=True, check=True)
    defined, strong = set(), set()
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("cu"):
            defined.add(parts[2])
            if parts[1] == "T":
                strong.add(parts[2])
    return defined, strong


def current_symbols(rows):
    """Base name -> the symbol cuGetProcAddress(name, CUDA_VERSION) hands out (legacy stream)."""
    chosen = {}
    for base, version, per_thread, symbol, _ in rows:
        if per_thread or version > CURRENT_VERSION:
            continue
        if base not in chosen or version >= chosen[base][0]:
            chosen[base] = (version, symbol)
    return {base: symbol for base, (version, symbol) in chosen.items()}


def render(families, order, header_of, status, refused):
    counts = {family: [0, 0, 0] for family in order}
    for base, (state, _) in status.items():
        counts[families[base]][state] += 1
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    core = [b for b in status if header_of.get(families[b], "cuda.h") in ("cuda.h", "cudaProfiler.h")]
    core_implemented = sum(1 for b in core if status[b][0] == 0)
    lines = [
        "# Driver API compatibility",
        "",
        "Generated by `client/gen/generate_compatibility.py` from the toolkit's driver headers",
        "(`cuda.h`, `cudaProfiler.h`, `cudaGL.h`, `cudaEGL.h`, `cudaVDPAU.h`), the definitions in",
        "`client/*.cc` and `client/refused_calls.def`; CI fails when this file is stale",
        "(`python3 client/gen/generate_compatibility.py` rewrites it). Do not edit by hand.",
        "",
        "A base name folds `cuX`, `cuX_v2`, ... and the per-thread-stream variants together, as",
        f"`cuGetProcAddress` sees them; it counts as implemented when the symbol that",
        f"`cuGetProcAddress(name, {CURRENT_VERSION})` returns is defined by the client (such a call",
        "may still refuse particular arguments, each with its reason under `GPU_POOL_LOG=1`).",
        "*Refused* calls return the error below and say why; *not implemented* ones are generated",
        "stubs that return `CUDA_ERROR_NOT_SUPPORTED` and print `gpupool: <name> is not supported`.",
        "",
        f"**{total[0]} of {len(status)} base names implemented, {total[1]} refused with a reason, "
        f"{total[2]} not implemented.** Of the {len(core)} base names of `cuda.h` and",
        f"`cudaProfiler.h` alone (graphics interop left out), {core_implemented} are implemented.",
        "",
        "| family | base names | implemented | refused | not implemented |",
        "|---|---:|---:|---:|---:|",
    ]
    for family in order:
        c = counts[family]
        if sum(c):
            lines.append(f"| {family} | {sum(c)} | {c[0]} | {c[1]} | {c[2]} |")
    lines.append(f"| **total** | **{len(status)}** | **{total[0]}** | **{total[1]}** | "
                 f"**{total[2]}** |")
    lines += ["", "## Refused, and why", "", "| call | returns | reason |", "|---|---|---|"]
    for symbol in sorted(refused):
        code, reason = refused[symbol]
        lines.append(f"| `{symbol}` | `{code}` | {reason.replace('|', '/')} |")
    lines += ["", "## Not implemented yet, by family", ""]
    for family in order:
        missing = sorted(b for b, (state, _) in status.items()
                         if state == 2 and families[b] == family)
        if missing:
            lines.append(f"- **{family}** ({len(missing)}): " +
                         ", ".join(f"`{b}`" for b in missing))
    lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-include", default=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include"))
    parser.add_argument("--cc", default="cc")
    parser.add_argument("--output", default=os.path.join(REPO, "docs", "compatibility.md"))
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--library")
    args = parser.parse_args()
    # The sanitizer stages run tests with a sanitizer runtime in LD_PRELOAD; the compiler and nm
    # this script starts are not ours to check (LeakSanitizer would fail them).
    os.environ.pop("LD_PRELOAD", None)

    declarations = surface.preprocess(args.cc, args.cuda_include, surface.DECLARATION_HEADERS)
    typedef_text = surface.preprocess(
        args.cc, args.cuda_include, surface.TYPEDEF_HEADERS + surface.DECLARATION_HEADERS)
    functions = surface.parse_function_declarations(declarations)
    rows = surface.build_proc_address_table(
        functions, surface.parse_pfn_typedefs(typedef_text),
        surface.parse_type_aliases(typedef_text), [])
    exported = set(functions)
    defined = defined_in_sources(exported)
    refused = refused_calls(exported)
    # Every ABI of a refused base name is generated as a refusal.
    refused_symbols = {s for s in exported if VERSION_SUFFIX.sub("", s) in refused}
    for symbol in sorted(set(defined) & refused_symbols):
        sys.exit(f"{symbol} is both defined in {defined[symbol]} and refused in "
                 "client/refused_calls.def: keep one")

    if args.library:
        dynamic, strong = dynamic_symbols_of(args.library)
        if exported - dynamic:
            sys.exit(f"{args.library} does not export {sorted(exported - dynamic)}, which the "
                     "headers declare")
        strong &= exported
        expected = set(defined)
        if strong != expected:
            sys.exit("the library's strong definitions differ from the sources': only in the "
                     f"library {sorted(strong - expected)}, only in the sources "
                     f"{sorted(expected - strong)}")

    families, order, header_of = header_families(args.cuda_include)
    status = {}
    for base, symbol in current_symbols(rows).items():
        if base not in families:
            families[base] = "Outside cuda.h's groups"
            if families[base] not in order:
                order.append(families[base])
        state = 0 if symbol in defined else 1 if base in refused else 2
        status[base] = (state, symbol)
    text = render(families, order, header_of, status, refused)

    if args.check:
        committed = read(args.output) if os.path.exists(args.output) else ""
        if committed != text:
            sys.exit(f"{os.path.relpath(args.output, REPO)} is stale: run "
                     "python3 client/gen/generate_compatibility.py and commit the result")
        print(f"compatibility: {os.path.relpath(args.output, REPO)} is current")
        return
    surface.write_output(args.output, text)


if __name__ == "__main__":
    main()
