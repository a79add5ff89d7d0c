"""default_collate / default_convert on nested structures."""
import collections
import dataclasses

import numpy as np
import pytest

from funcgrad.data import default_collate, default_convert

Pair = collections.namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Example:
    x: np.ndarray
    y: int


def test_numbers_and_arrays():
    out = default_collate([np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)])
    assert out.dtype == np.float32 and out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    ints = default_collate([1, 2, 3])
    assert ints.dtype == np.int64 and ints.tolist() == [1, 2, 3]
    floats = default_collate([0.5, 1.5])
    assert floats.dtype == np.float64 and floats.tolist() == [0.5, 1.5]
    bools = default_collate([True, False])
    assert bools.dtype == np.bool_ and bools.tolist() == [True, False]
    scalars = default_collate([np.int16(3), np.int16(-1)])
    assert scalars.dtype == np.int16 and scalars.tolist() == [3, -1]
    cplx = default_collate([1 + 2j, 3j])
    assert cplx.dtype == np.complex128 and cplx.tolist() == [1 + 2j, 3j]


def test_nested_structure_keeps_its_types():
    items = [
        {"img": np.full((2, 2), k, np.uint8), "meta": (k, [float(k), "s%d" % k]),
         "pair": Pair(np.int32(k), {"deep": np.array([k, -k])}), "name": "n%d" % k,
         "none": None}
        for k in range(3)
    ]
    out = default_collate(items)
    assert set(out) == {"img", "meta", "pair", "name", "none"}
    assert out["img"].shape == (3, 2, 2) and out["img"].dtype == np.uint8
    assert out["img"][:, 0, 0].tolist() == [0, 1, 2]
    assert isinstance(out["meta"], tuple) and out["meta"][0].tolist() == [0, 1, 2]
    assert isinstance(out["meta"][1], list)
    assert out["meta"][1][0].tolist() == [0.0, 1.0, 2.0] and out["meta"][1][1] == ["s0", "s1", "s2"]
    assert isinstance(out["pair"], Pair)
    assert out["pair"].left.dtype == np.int32 and out["pair"].left.tolist() == [0, 1, 2]
    assert out["pair"].right["deep"].tolist() == [[0, 0], [1, -1], [2, -2]]
    assert out["name"] == ["n0", "n1", "n2"]
    assert out["none"] == [None, None, None]


def test_dataclass_and_ordered_dict():
    out = default_collate([Example(np.zeros(3), 1), Example(np.ones(3), 2)])
    assert isinstance(out, Example)
    assert out.x.tolist() == [[0, 0, 0], [1, 1, 1]] and out.y.tolist() == [1, 2]
    od = default_collate([collections.OrderedDict(b=1, a=2), collections.OrderedDict(b=3, a=4)])
    assert isinstance(od, collections.OrderedDict) and list(od) == ["b", "a"]
    assert od["a"].tolist() == [2, 4]


def test_mismatched_shapes_name_the_location_and_shapes():
    items = [{"x": [np.zeros(3), np.zeros((2, 2))]}, {"x": [np.zeros(3), np.zeros((2, 3))]}]
    with pytest.raises(ValueError) as err:
        default_collate(items)
    msg = str(err.value)
    assert "default_collate" in msg and "batch['x'][1]" in msg
    assert "(2, 2)" in msg and "(2, 3)" in msg


def test_mismatched_keys_and_lengths():
    with pytest.raises(ValueError, match=r"item 1 of the batch has keys \['a', 'c'\], but item 0 has keys \['a', 'b'\]"):
        default_collate([{"a": 1, "b": 2}, {"a": 1, "c": 2}])
    with pytest.raises(ValueError, match="item 1 of the batch has 3 fields, but item 0 has 2"):
        default_collate([(1, 2), (1, 2, 3)])


def test_unsupported_type_and_empty_batch():
    with pytest.raises(TypeError, match=r"cannot collate the items at batch\['obj'\] of type .*object"):
        default_collate([{"obj": object()}, {"obj": object()}])
    with pytest.raises(ValueError, match="empty batch"):
        default_collate([])
    with pytest.raises(TypeError, match="expects a list of items"):
        default_collate("abc")


def test_default_convert_is_structure_preserving():
    item = {"x": np.arange(3), "t": (1, "a"), "p": Pair(1, 2)}
    out = default_convert(item)
    assert out["x"] is item["x"] and out["t"] == (1, "a") and out["p"] == Pair(1, 2)
