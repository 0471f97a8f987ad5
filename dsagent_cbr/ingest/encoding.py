"""Decode a fetched body strictly. A page is read with the charset it declares (HTTP header, BOM or
<meta>), else as UTF-8; bytes that do not fit are an error, never silent mojibake in the bank."""

from __future__ import annotations

import codecs
import re

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class DecodeError(ValueError):
    pass


def header_charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    match = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", content_type, re.I)
    return match.group(1) if match else None


def declared_charset(body: bytes, content_type: str | None) -> str | None:
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    found = header_charset(content_type)
    if found:
        return found
    match = _META_CHARSET.search(body[:4096])
    return match.group(1).decode("ascii", "replace") if match else None


def decode_body(body: bytes, content_type: str | None = None) -> str:
    charset = declared_charset(body, content_type)
    if charset:
        try:
            codec = codecs.lookup(charset).name
        except LookupError as exc:
            raise DecodeError(f"the page declares an unknown charset {charset!r}") from exc
        try:
            return body.decode(codec)
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"the page says it is {charset} but byte {exc.start} is not valid {charset}"
            ) from exc
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"the page is not UTF-8 (invalid byte 0x{body[exc.start]:02x} at offset {exc.start}) "
            "and declares no charset"
        ) from exc
