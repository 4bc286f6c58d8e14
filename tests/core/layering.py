#!/usr/bin/env python3
"""The library's modules include only the modules below them: no import runs back up a layer.

The order (artune/<module>/, lowest first; modules on one level may not include each other):

  core  <  topology, logs  <  algorithms  <  simulator, executor  <  tuner  <  comm, report

comm (the communicator, the C API) is the library's top module; report (the decision table as text, the
autotune report, lowering printouts) sits beside it, linked by the CLI and the tests only, never into libartune; its public headers in include/artune/
(communicator.hpp, artune.h) include nothing but core. Above the library, cli/, nccl_tuner/ and python/ may
include anything. Reads every #include "artune/..." of the library's sources and headers.

  layering.py ROOT     prints one line per include that runs up or sideways; exit 1 on any
  layering.py --self-test   the checker itself finds an upward, a sideways and a public-header include
"""

import os
import re
import sys
import tempfile

LEVEL = {"core": 0, "topology": 1, "logs": 1, "algorithms": 2, "simulator": 3, "executor": 3, "tuner": 4,
         "comm": 5, "report": 5}
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]artune/([a-z_]+)(/|\.h)')
SUFFIXES = (".hpp", ".cpp", ".h", ".cu", ".cuh")


def target_of(name, slash):
    """The module an include names: artune/<module>/x.hpp, or a public header artune/communicator.hpp."""
    return name if slash == "/" else "public"


def problems(root):
    found = []
    checked = 0
    places = [(os.path.join(root, "artune", m), m) for m in LEVEL]
    places.append((os.path.join(root, "include", "artune"), "public"))
    for folder, module in places:
        if not os.path.isdir(folder):
            found.append(f"{os.path.relpath(folder, root)}: missing (the layering list is out of date)")
            continue
        for base, _, files in os.walk(folder):
            for f in sorted(files):
                if not f.endswith(SUFFIXES):
                    continue
                path = os.path.join(base, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as fh:
                    for number, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        name = m.group(1) if m.group(2) == "/" else m.group(1) + ".h"
                        target = target_of(m.group(1), m.group(2))
                        if target == "public":
                            if module not in ("comm", "public"):
                                found.append(f"{rel}:{number}: includes the public API artune/{name}* from {module}")
                            continue
                        if target not in LEVEL:
                            found.append(f"{rel}:{number}: includes artune/{target}/, not a library module")
                            continue
                        if module == "public":
                            if target != "core":
                                found.append(f"{rel}:{number}: a public header includes artune/{target}/ "
                                             "(only core types belong in the public API)")
                            continue
                        if target == module:
                            continue
                        if LEVEL[target] >= LEVEL[module]:
                            way = "up" if LEVEL[target] > LEVEL[module] else "sideways"
                            found.append(f"{rel}:{number}: {module} includes artune/{target}/ ({way} a layer)")
    return found, checked


def self_test():
    with tempfile.TemporaryDirectory() as root:
        files = {"artune/core/a.hpp": '#include "artune/tuner/search.hpp"\n',
                 "artune/simulator/b.cpp": '#include "artune/executor/backend.hpp"\n#include "artune/core/types.hpp"\n',
                 "include/artune/communicator.hpp": '#include "artune/executor/backend.hpp"\n',
                 "artune/comm/c.cpp": '#include "artune/communicator.hpp"\n#include "artune/tuner/search.hpp"\n'}
        for m in LEVEL:
            os.makedirs(os.path.join(root, "artune", m), exist_ok=True)
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        found, checked = problems(root)
    expected = ["artune/core/a.hpp:1: core includes artune/tuner/ (up a layer)",
                "artune/simulator/b.cpp:1: simulator includes artune/executor/ (sideways a layer)",
                "include/artune/communicator.hpp:1: a public header includes artune/executor/ (only core types "
                "belong in the public API)"]
    ok = checked == 6 and sorted(found) == sorted(expected)
    print("layering self-test:", "ok" if ok else f"FAILED: {checked} checked, found {found}")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    found, checked = problems(sys.argv[1])
    for p in found:
        print(p)
    print(f"layering: {checked} includes checked, {len(found)} against the module order")
    if checked == 0:
        return 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
