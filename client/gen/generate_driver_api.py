#!/usr/bin/env python3
"""Generates the fake libcuda's driver surface from the CUDA toolkit headers.

Outputs (into --out-dir, never checked in):
  driver_stubs.cc         one weak, default-visibility definition per driver entry point that
                          cuda.h declares (legacy ABIs and _ptds/_ptsz variants included); each
                          returns gpupool::client::reportNotSupported("<name>"), or, for the
                          names client/refused_calls.def lists, reportRefused with the row's
                          error and reason. Strong definitions elsewhere in libcuda.so.1
                          override them at link time.
  proc_address_table.cc   the cuGetProcAddress table: (base name, version breakpoint, stream
                          class, exported symbol), derived from the PFN_cuX_vNNNN[_ptds|_ptsz]
                          typedefs of cudaTypedefs.h. Every row carries a static_assert that the
                          typedef and the chosen symbol have the same type, so a wrong match
                          fails the build instead of corrupting a caller's stack.
  exported_names.txt      the exported names, one per line (for humans and tests).
  proc_address_table.txt  the table in readable form (for review).

Declarations are read from the C preprocessor's output with __CUDA_API_VERSION_INTERNAL defined,
which is the only configuration in which cuda.h declares every ABI the real driver exports.
"""

import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

# Headers whose driver entry points the real libcuda.so.1 exports, graphics interop included
# (vdpau/vdpau.h comes first because cudaVDPAU.h uses its types without including it).
DECLARATION_HEADERS = ["cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "vdpau/vdpau.h",
                       "cudaVDPAU.h"]
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaProfilerTypedefs.h", "cudaGLTypedefs.h",
                   "cudaEGLTypedefs.h", "cudaVDPAUTypedefs.h"]

C_KEYWORDS = {
    "const", "volatile", "unsigned", "signed", "int", "char", "short", "long", "float", "double",
    "void", "struct", "enum", "union", "size_t",
}


def preprocess(cc, include_dir, headers):
    source = "".join(f"#include <{h}>\n" for h in headers)
    result = subprocess.run(
        [cc, "-E", "-P", "-x", "c", "-D__CUDA_API_VERSION_INTERNAL", f"-I{include_dir}", "-"],
        input=source, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"preprocessing {headers} failed:\n{result.stderr}")
    return " ".join(result.stdout.split())


def balanced_parens(text, open_index):
    """Returns the index just past the ')' that closes the '(' at open_index."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced parentheses")


def split_params(params):
    """Splits a parameter list (without its outer parentheses) at top-level commas."""
    parts, depth, current = [], 0, ""
    for ch in params:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return [] if parts == ["void"] else parts


def parse_function_declarations(text):
    """Maps each `CUresult cuX(...);` name to its parameter text, in declaration order."""
    functions = {}
    for match in re.finditer(r"\bCUresult\s+(cu\w+)\s*\(", text):
        end = balanced_parens(text, match.end() - 1)
        if not text[end:].lstrip().startswith(";"):
            continue  # not a declaration
        functions.setdefault(match.group(1), text[match.end():end - 1].strip())
    return functions


def parse_pfn_typedefs(text):
    """Maps each PFN_cu... typedef name to its parameter text."""
    typedefs = {}
    pattern = r"\btypedef\s+CUresult\s*\(\s*\*\s*(PFN_cu\w+)\s*\)\s*\("
    for match in re.finditer(pattern, text):
        end = balanced_parens(text, match.end() - 1)
        typedefs[match.group(1)] = text[match.end():end - 1].strip()
    return typedefs


def parse_type_aliases(text):
    """Maps simple `typedef <type> Name;` aliases (and tagged struct/enum bodies) to their type."""
    aliases = {}
    for match in re.finditer(r"\btypedef\s+([A-Za-z_][\w\s\*]*?)\s*\b([A-Za-z_]\w*)\s*;", text):
        aliases[match.group(2)] = match.group(1).strip()
    # typedef struct Tag { ... } Name;  →  Name = struct Tag
    for match in re.finditer(r"\btypedef\s+(struct|enum|union)\s+(\w+)\s*\{", text):
        depth, i = 0, match.end() - 1
        while i < len(text):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            i += 1
            if depth == 0:
                break
        declarators = text[i:text.index(";", i)]
        for name in re.findall(r"\b[A-Za-z_]\w*\b", declarators):
            aliases[name] = f"{match.group(1)} {match.group(2)}"
    return aliases


def canonical_param(param, aliases):
    """Type of one parameter with its name removed and typedef aliases resolved."""
    param = re.sub(r"\[[^\]]*\]", "*", param)  # arrays decay to pointers
    tokens = re.findall(r"[A-Za-z_]\w*|\*|\(|\)", param)
    # Drop the parameter name: the last identifier when something type-like precedes it.
    identifiers = [i for i, t in enumerate(tokens) if re.match(r"[A-Za-z_]", t)]
    if len(identifiers) >= 2:
        last = identifiers[-1]
        if tokens[last] not in C_KEYWORDS and not (
                tokens[identifiers[-2]] in ("struct", "enum", "union") and identifiers[-2] == last - 1):
            del tokens[last]
    result = []
    for token in tokens:
        seen = set()
        while token in aliases and token not in seen:
            seen.add(token)
            token = aliases[token]
        result.extend(token.split())
    return " ".join(result)


def canonical_signature(params, aliases):
    return tuple(canonical_param(p, aliases) for p in split_params(params))


PFN_NAME = re.compile(r"^PFN_(cu[A-Za-z0-9]+)_v(\d+)(_ptds|_ptsz)?$")


def symbol_series(base, exported):
    """Exported ABIs of base in age order: base, base_v2, base_v3, ..."""
    series = [base] if base in exported else []
    n = 2
    while f"{base}_v{n}" in exported:
        series.append(f"{base}_v{n}")
        n += 1
    return series


def per_thread_variant(symbol, exported):
    for suffix in ("_ptds", "_ptsz"):
        if symbol + suffix in exported:
            return symbol + suffix
    return None


def build_proc_address_table(functions, typedefs, aliases, warnings):
    """Returns rows (base, version, per_thread, symbol, pfn_typedef) sorted by base, class, version.

    Legacy-stream rows: the PFN typedefs without suffix, in version order, are matched against
    the exported ABIs base, base_v2, ... in age order; each newer typedef moves to the next ABI
    whose parameters match (a new PFN version means a new ABI even when the parameter types
    are unchanged, e.g. cuEventElapsedTime@12080 = cuEventElapsedTime_v2).
    Per-thread rows: the same breakpoints, each with the _ptds/_ptsz variant of the legacy symbol
    where one exists, since the driver serves a per-thread request with the per-thread ABI of
    whatever the version selects (cuMemcpyHtoD@3020 flags 2 → cuMemcpyHtoD_v2_ptds).
    """
    exported = set(functions)
    signature = {name: canonical_signature(p, aliases) for name, p in functions.items()}
    legacy = defaultdict(list)
    per_thread = defaultdict(list)
    for pfn, params in typedefs.items():
        match = PFN_NAME.match(pfn)
        if not match:
            warnings.append(f"unrecognised typedef name {pfn}")
            continue
        base, version, suffix = match.group(1), int(match.group(2)), match.group(3)
        target = per_thread if suffix else legacy
        target[base].append((version, pfn, canonical_signature(params, aliases)))

    rows = []
    for base in sorted(legacy):
        series = symbol_series(base, exported)
        position = -1
        for version, pfn, sig in sorted(legacy[base]):
            chosen = None
            for i in range(position + 1, len(series)):
                if signature[series[i]] == sig:
                    chosen = i
                    break
            if chosen is None and position >= 0 and signature[series[position]] == sig:
                chosen = position  # same ABI re-announced at a later version
            if chosen is None:
                if series:
                    warnings.append(f"{pfn}: no exported ABI of {base} matches {sig}")
                continue
            position = chosen
            symbol = series[chosen]
            rows.append((base, version, False, symbol, pfn))
            variant = per_thread_variant(symbol, exported)
            rows.append((base, version, True, variant or symbol, None))

    # Check the per-thread typedefs against what the rule above produced, and add any per-thread
    # ABI that has no legacy counterpart.
    for base in sorted(per_thread):
        for version, pfn, sig in sorted(per_thread[base]):
            candidates = [r for r in rows if r[0] == base and r[2] and r[1] <= version]
            if candidates:
                row = max(candidates, key=lambda r: r[1])
                if signature[row[3]] != sig:
                    warnings.append(f"{pfn}: per-thread symbol {row[3]} has another ABI")
                else:
                    rows[rows.index(row)] = row[:4] + (pfn,)
                continue
            matches = [s for s in exported
                       if re.fullmatch(re.escape(base) + r"(_v\d+)?_pt(ds|sz)", s)
                       and signature[s] == sig]
            if matches:
                rows.append((base, version, True, sorted(matches)[0], pfn))
            else:
                warnings.append(f"{pfn}: no exported per-thread ABI matches")
    rows.sort(key=lambda r: (r[0], r[2], r[1]))
    return rows


def write_output(path, text):
    # Always rewritten (never "if changed"): the build reruns this only when an input changed,
    # and an output older than its inputs would make it rerun on every build.
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


PREAMBLE = """// Generated by client/gen/generate_driver_api.py from the CUDA toolkit headers. Do not edit.
// Compiled with __CUDA_API_VERSION_INTERNAL so that cuda.h declares every exported ABI under its
// real symbol name.
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaProfiler.h>
#include <cudaGL.h>
#include <cudaEGL.h>
#include <vdpau/vdpau.h>
#include <cudaVDPAU.h>
"""


REFUSED_ROW = re.compile(r'^GPUPOOL_REFUSED\((\w+),\s*(\w+),\s*"((?:[^"\\]|\\.)*)"\)\s*$')
VERSION_SUFFIX = re.compile(r"(_v\d+)?(_ptds|_ptsz)?$")


def read_refused_calls(path):
    """Base name -> (CUresult name, reason) from refused_calls.def; comments and blanks skipped."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("//"):
                continue
            row = REFUSED_ROW.match(line)
            if not row:
                sys.exit(f"{path}:{number}: not a GPUPOOL_REFUSED(name, CUresult, \"reason\") row")
            rows[row.group(1)] = (row.group(2), row.group(3))
    return rows


def render_stubs(functions, refused):
    lines = [PREAMBLE, '#include "not_supported.h"', "",
             "// The names must not be rewritten by any renaming macro that cuda.h left defined."]
    lines += [f"#undef {name}" for name in functions]
    lines += ["", '#pragma GCC diagnostic ignored "-Wunused-parameter"', "", 'extern "C" {', ""]
    for name, params in functions.items():
        lines.append(f'__attribute__((weak, visibility("default"))) CUresult CUDAAPI {name}('
                     f'{params}) {{')
        refusal = refused.get(VERSION_SUFFIX.sub("", name))
        if refusal:
            code, reason = refusal
            lines.append(f'  return gpupool::client::reportRefused("{name}", {code}, "{code}", '
                         f'"{reason}");')
        else:
            lines.append(f'  return gpupool::client::reportNotSupported("{name}");')
        lines.append("}")
    lines += ["", '}  // extern "C"', ""]
    return "\n".join(lines)


def render_table(functions, rows):
    lines = [PREAMBLE] + [f"#include <{h}>" for h in TYPEDEF_HEADERS] + [
             "", "#include <type_traits>", "", '#include "proc_address.h"', ""]
    lines += [f"#undef {name}" for name in functions]
    lines += ["", "namespace gpupool::client {", "",
              "// Sorted by (name, per-thread class, version).",
              "static const ProcAddressEntry kProcAddressTable[] = {"]
    for base, version, per_thread, symbol, _ in rows:
        flag = "true" if per_thread else "false"
        lines.append(f'    {{"{base}", {version}, {flag}, reinterpret_cast<void*>(&{symbol}), '
                     f'"{symbol}"}},')
    lines += ["};", ""]
    for base, version, per_thread, symbol, pfn in rows:
        if pfn:
            lines.append(f"static_assert(std::is_same_v<{pfn}, decltype(&{symbol})>);")
    lines += ["", "std::span<const ProcAddressEntry> procAddressTable() { return kProcAddressTable; }",
              "", "}  // namespace gpupool::client", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-include", required=True, help="directory holding cuda.h")
    parser.add_argument("--cc", default="cc", help="C compiler used as the preprocessor")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--refused", required=True, help="client/refused_calls.def")
    args = parser.parse_args()

    declarations = preprocess(args.cc, args.cuda_include, DECLARATION_HEADERS)
    typedef_text = preprocess(args.cc, args.cuda_include, TYPEDEF_HEADERS + DECLARATION_HEADERS)
    functions = parse_function_declarations(declarations)
    typedefs = parse_pfn_typedefs(typedef_text)
    aliases = parse_type_aliases(typedef_text)
    warnings = []
    rows = build_proc_address_table(functions, typedefs, aliases, warnings)
    for warning in warnings:
        print(f"generate_driver_api: warning: {warning}", file=sys.stderr)

    os.makedirs(args.out_dir, exist_ok=True)
    refused = read_refused_calls(args.refused)
    write_output(os.path.join(args.out_dir, "driver_stubs.cc"), render_stubs(functions, refused))
    write_output(os.path.join(args.out_dir, "proc_address_table.cc"),
                     render_table(functions, rows))
    write_output(os.path.join(args.out_dir, "exported_names.txt"),
                     "".join(f"{name}\n" for name in sorted(functions)))
    write_output(os.path.join(args.out_dir, "proc_address_table.txt"), "".join(
        f"{b} {v} {'per-thread' if p else 'legacy'} {s}\n" for b, v, p, s, _ in rows))


if __name__ == "__main__":
    main()
