"""The search half of ``grep``, run as a child process (``python -I -S _grep_search.py``).

A model-chosen regular expression can backtrack exponentially (``(a+)+$``), and Python's ``re``
holds the interpreter lock for the whole of one ``search`` call: in a thread of the daemon that
stalls every session. Here the search runs in its own process, which the tool kills at its
deadline; the event loop only waits on a pipe.

Standard library only, and nothing imported from the package: ``-I -S`` keeps the child's start
at about 15 ms and its environment out of reach. One JSON request on stdin (see
:func:`_search`), one JSON answer on stdout. Bounds of its own: address space (``RLIMIT_AS``)
and CPU time (``RLIMIT_CPU``, the deadline plus a second, in case the daemon dies before it
can kill the child). Each file is checked again once opened: a file that is one of the
protected files (device and inode) is skipped and named, as are files grown past the size
limit or binary.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import sys
from typing import Any

_SNIFF = 8192
_MEMORY_BYTES = 1 << 30


def _limit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


def _search(request: dict[str, Any]) -> dict[str, Any]:
    """Search ``request["files"]`` (``[path, shown]`` pairs) for ``request["pattern"]``."""
    raw: str = request["pattern"]
    flags = re.IGNORECASE if request["ignore_case"] else 0
    try:
        regex = re.compile(re.escape(raw) if request["literal"] else raw, flags)
    except re.error as exc:
        return {"error": f"invalid regular expression {raw!r}: {exc}"}
    except (RecursionError, OverflowError, MemoryError) as exc:  # absurd nesting or counts
        return {"error": f"the regular expression {raw!r} cannot be compiled: {exc!r}"}
    context: int = request["context"]
    limit: int = request["limit"]
    max_chars: int = request["max_output_chars"]
    max_bytes: int = request["max_file_bytes"]
    protected = {(dev, ino) for dev, ino in request["protected"]}
    out: list[str] = []
    used = 0
    matches = 0
    secret: list[str] = []

    def emit(text: str) -> None:
        nonlocal used
        if used <= max_chars:  # past it the tool cuts the text anyway: stop growing it
            out.append(text[: max_chars + 1])
            used += min(len(text), max_chars + 1) + 1

    for path, shown in request["files"]:
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                if (info.st_dev, info.st_ino) in protected:
                    secret.append(shown)
                    continue
                if info.st_size > max_bytes:
                    continue
                data = handle.read(max_bytes + 1)
        except OSError:
            continue
        if len(data) > max_bytes or b"\0" in data[:_SNIFF]:
            continue
        lines = data.decode("utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            if not regex.search(line):
                continue
            matches += 1
            if matches > limit:
                break
            if context:
                low, high = max(1, number - context), min(len(lines), number + context)
                for n in range(low, high + 1):
                    emit(f"{shown}:{n}{':' if n == number else '-'} {lines[n - 1]}")
                emit("--")
            else:
                emit(f"{shown}:{number}: {line}")
        if matches > limit:
            break
    return {"error": None, "lines": out, "matches": matches, "secret": secret}


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    _limit(resource.RLIMIT_CPU, math.ceil(request["timeout_s"]) + 1)
    _limit(resource.RLIMIT_AS, _MEMORY_BYTES)
    try:
        answer = _search(request)
    except MemoryError:
        answer = {"error": "the search needed more than 1 GiB of memory"}
    sys.stdout.buffer.write(json.dumps(answer).encode())


if __name__ == "__main__":
    main()
