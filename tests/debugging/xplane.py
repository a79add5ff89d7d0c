"""A minimal reader of the profiler's ``.xplane.pb`` (an ``XSpace`` protobuf) for the tests,
without a protobuf package: the wire format's varints and length-delimited fields are enough.

Field numbers (tsl/profiler/protobuf/xplane.proto): XSpace.planes = 1; XPlane.name = 2,
XPlane.lines = 3, XPlane.event_metadata = 4 (map<int64, XEventMetadata>: entry key = 1,
value = 2); XLine.name = 2, XLine.events = 4; XEvent.metadata_id = 1; XEventMetadata.id = 1,
XEventMetadata.name = 2.
"""


def _varint(data, i):
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(data):
    """(field number, wire type, value) for each field of one message; length-delimited
    values are bytes, varints ints; fixed 32/64-bit values are skipped as bytes."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"xplane: unexpected wire type {wire} at byte {i}")
        out.append((number, wire, value))
    return out


def _first(message, number, default=b""):
    return next((v for n, _, v in fields(message) if n == number), default)


def planes(data):
    """{plane name: {line name: [event names in order]}} of an XSpace."""
    result = {}
    for number, _, plane in fields(data):
        if number != 1:
            continue
        names = {}
        for n, _, entry in fields(plane):
            if n == 4:
                meta = _first(entry, 2)
                names[_first(meta, 1, 0)] = _first(meta, 2).decode("utf-8", "replace")
        lines = {}
        for n, _, line in fields(plane):
            if n == 3:
                events = [names.get(_first(e, 1, 0), "?") for m, _, e in fields(line) if m == 4]
                lines[_first(line, 2).decode("utf-8", "replace")] = events
        result[_first(plane, 2).decode("utf-8", "replace")] = lines
    return result
