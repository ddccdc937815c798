#!/usr/bin/env bash
# Checks that what the docs cite still exists: every repository path and every gtest test name
# in README.md, docs/*.md and the comments of protocol/gpupool.capnp. Lists each stale reference
# as FILE:LINE and exits 1.
#
#   scripts/check-doc-refs.sh
#
# Paths: backticked words and fenced code in Markdown, comments in the schema, that start with a
# top-level folder or file of the repository (`server/session.cc`, `tests/e2e/`) or name a source
# file (`x/y.h`); they are relative to the repository root. Globs (`server/tenant_*`), braces
# (`fuzz/fuzz_inputs.{h,cc}`) and placeholders (`fuzz/corpus/<target>/`, read as `*`) must match
# something. Markdown links are relative to the file that has them. What a build writes (build/...)
# is not checked.
# Test names: `Suite.Test`, `Prefix/Suite.Test/param` and globs (`Suite.*`, `Suite.Pinned*`) must
# match a TEST, TEST_F or TEST_P in the sources (and a parameterized test's prefix an
# INSTANTIATE_TEST_SUITE_P of its suite), or an add_test(NAME Suite.Test) in a CMakeLists.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

exec python3 - "$@" <<'PY'
import fnmatch
import glob
import os
import re
import subprocess
import sys

DOCS = ["README.md"] + sorted(glob.glob("docs/*.md"))
SCHEMAS = ["protocol/gpupool.capnp"]
SOURCE_EXTENSIONS = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh")
# A word with a slash that ends like one of these is a file path even outside a top-level folder.
FILE_EXTENSIONS = SOURCE_EXTENSIONS + (".py", ".sh", ".md", ".capnp", ".cmake", ".toml", ".txt",
                                       ".yaml", ".yml", ".service", ".supp")

tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True, text=True).stdout.split("\0")
tracked = [f for f in tracked if f and os.path.exists(f)]
TOP_LEVEL = {f.split("/", 1)[0] for f in tracked}

# --- test names defined in the sources ------------------------------------------------------
TEST_DEFINITION = re.compile(r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
INSTANTIATION = re.compile(r"\bINSTANTIATE_(?:TEST_SUITE_P|TEST_CASE_P|TYPED_TEST_SUITE_P)\s*\(\s*(\w+)\s*,\s*(\w+)")
tests = {}  # suite -> test names
prefixes = {}  # parameterized suite -> instantiation prefixes
for path in tracked:
    if not path.endswith(SOURCE_EXTENSIONS):
        continue
    with open(path, errors="replace") as f:
        text = f.read()
    if "TEST" not in text:
        continue
    for suite, name in TEST_DEFINITION.findall(text):
        tests.setdefault(suite, set()).add(name)
    for prefix, suite in INSTANTIATION.findall(text):
        prefixes.setdefault(suite, set()).add(prefix)
# Tests that CMake defines directly (add_test(NAME Suite.Test ...)).
CMAKE_TEST = re.compile(r"\badd_test\s*\(\s*NAME\s+(\w+)\.(\w+)")
for path in tracked:
    if os.path.basename(path) == "CMakeLists.txt":
        with open(path, errors="replace") as f:
            for suite, name in CMAKE_TEST.findall(f.read()):
                tests.setdefault(suite, set()).add(name)

# --- what a cited word is -------------------------------------------------------------------
TEST_NAME = re.compile(r"^(?:(\w+)/)?([A-Z]\w*)\.([A-Z*][\w*]*)(?:/[\w*]+)?$")


def test_problem(word):
    """None when `word` is not a test name or names existing tests; else what is wrong."""
    m = TEST_NAME.match(word)
    if not m:
        return None
    prefix, suite, name = m.groups()
    if suite not in tests:
        return f"test suite {suite} (in {word}) is not defined"
    if not any(fnmatch.fnmatchcase(t, name) for t in tests[suite]):
        return f"no test {suite}.{name} (in {word})"
    if prefix and prefix != "*" and prefixes.get(suite) and prefix not in prefixes[suite]:
        return f"{suite} is not instantiated as {prefix} (in {word})"
    return None


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for choice in m.group(1).split(","):
        out += expand_braces(word[: m.start()] + choice + word[m.end():])
    return out


def is_path(word):
    if word.startswith(("build/", "build-")):
        return False  # what a build writes (build/lib/libcuda.so.1, build/gpu-bundle/...)
    if not word or "://" in word or word.startswith(("/", "~", "-", "$", "..")):
        return False
    if "/" not in word:
        return word in TOP_LEVEL and "." in word  # README.md, CMakeLists.txt
    first = word.split("/", 1)[0]
    return first in TOP_LEVEL or word.rstrip("*").endswith(FILE_EXTENSIONS)


def path_problem(word, base="."):
    pattern = re.sub(r"<[^<>]*>", "*", word)
    for candidate in expand_braces(pattern):
        full = os.path.normpath(os.path.join(base, candidate))
        if any(c in candidate for c in "*?["):
            if not glob.glob(full):
                return f"nothing matches {word}"
        elif not os.path.exists(full):
            return f"{word} does not exist"
    return None


STRIP = "'\"`,;:()[]"


def words(text):
    for word in text.split():
        word = word.strip(STRIP)
        word = word.rstrip(".")  # end of a sentence; a path ending in '.' is not one of ours
        if word:
            yield word


problems = []
checked = 0


def check_word(where, word):
    global checked
    if TEST_NAME.match(word):
        problem = test_problem(word)
    elif is_path(word):
        problem = path_problem(word)
    else:
        return
    checked += 1
    if problem:
        problems.append(f"{where}: {problem}")


LINK = re.compile(r"\]\(([^()\s]+)\)")
INLINE_CODE = re.compile(r"`([^`]+)`")
for doc in DOCS:
    in_fence = False
    with open(doc) as f:
        for number, line in enumerate(f, 1):
            where = f"{doc}:{number}"
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                for word in words(line):
                    check_word(where, word)
                continue
            for span in INLINE_CODE.findall(line):
                # A command line cites its program: `scripts/fuzz.sh 60`.
                first = span.split()[0] if span.split() else ""
                check_word(where, first.strip(STRIP))
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                checked += 1
                problem = path_problem(target.split("#", 1)[0], os.path.dirname(doc))
                if problem:
                    problems.append(f"{where}: link {problem}")

for schema in SCHEMAS:
    with open(schema) as f:
        for number, line in enumerate(f, 1):
            if "#" in line:
                for word in words(line.split("#", 1)[1]):
                    check_word(f"{schema}:{number}", word)

for problem in problems:
    print(problem)
if problems:
    print(f"check-doc-refs: {len(problems)} of {checked} references are stale")
    sys.exit(1)
print(f"check-doc-refs: {checked} references in {len(DOCS) + len(SCHEMAS)} files resolve")
PY
