"""A ``tools/call`` result as text for the model: text, images, resource links, embedded
resources and ``structuredContent``; ``isError`` kept. Binary data never reaches the text: an
image or a blob is named with its type and size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["render_result"]


def render_result(result: Mapping[str, Any]) -> tuple[str, bool]:
    parts: list[str] = []
    for item in result.get("content") or ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(item.get("data", ""))) * 3 // 4
            parts.append(f"[{kind}: {item.get('mimeType', 'unknown type')}, ~{size} bytes]")
        elif kind == "resource_link":
            name = item.get("name") or item.get("title") or ""
            parts.append(f"[resource link: {item.get('uri', '')}{' ' + str(name) if name else ''}]")
        elif kind == "resource":
            resource = item.get("resource")
            if isinstance(resource, Mapping):
                if "text" in resource:
                    parts.append(f"[resource {resource.get('uri', '')}]\n{resource['text']}")
                else:
                    size = len(str(resource.get("blob", ""))) * 3 // 4
                    parts.append(f"[resource {resource.get('uri', '')}: ~{size} bytes of data]")
    structured = result.get("structuredContent")
    if structured is not None and not parts:
        parts.append(msgspec.json.encode(structured).decode())
    is_error = bool(result.get("isError"))
    text = "\n".join(parts)
    if not text:
        text = "(the tool returned no content)"
    return text, is_error
