"""funcgrad.load on malformed and hostile files, funcgrad.save into bad places (issue 23)."""
import json
import os
import struct

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import CheckpointError
from funcgrad.checkpoint_header import MAX_HEADER


def _write(path, header, data=b"", length=None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if length is None else length))
        f.write(raw)
        f.write(data)
    return str(path)


def _t(dtype, shape, start, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [start, end]}


F32x2 = np.array([1.5, -2.0], np.float32).tobytes()
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
DEEP_TREE = '{"l": [' * 250 + '{"v": 1}' + ']}' * 250

# (id, header, data, header length override, expected message fragment)
HOSTILE = [
    ("claims-90MiB", {"a": _t("F32", [2], 0, 8)}, b"", 90 * 2**20,
     "claims 94371840 bytes but the file has"),
    ("beyond-max", b"{}", b"", MAX_HEADER + 1, "at most"),
    ("negative-shape-reversed", {"a": _t("F32", [-1], 4, 0)}, F32x2, None,
     "shape must be a list of non-negative integers"),
    ("reversed-offsets", {"a": _t("F32", [0], 8, 0)}, F32x2, None, "are reversed"),
    ("negative-offset", {"a": _t("F32", [2], -8, 0)}, F32x2, None,
     "data_offsets must be two non-negative integers"),
    ("overlapping", {"a": _t("F32", [2], 0, 8), "b": _t("F32", [1], 4, 8)}, F32x2, None,
     "overlaps the previous tensor"),
    ("same-bytes-twice", {"a": _t("F32", [2], 0, 8), "b": _t("F32", [2], 0, 8)}, F32x2, None,
     "overlaps the previous tensor"),
    ("gap", {"a": _t("F32", [1], 4, 8)}, F32x2, None, "leaves a gap"),
    ("out-of-range", {"a": _t("F32", [4], 0, 16)}, F32x2, None, "beyond the end of"),
    ("trailing-bytes", {"a": _t("F32", [1], 0, 4)}, F32x2, None, "short of the end of"),
    ("size-mismatch", {"a": _t("F32", [3], 0, 8)}, F32x2, None,
     "hold 8 bytes, but shape [3] of F32 needs 12"),
    ("huge-shape", {"a": _t("F32", [2**40, 2**40], 0, 8)}, F32x2, None, "needs"),
    ("unknown-dtype", {"a": _t("F128", [2], 0, 8)}, F32x2, None, "unknown dtype 'F128'"),
    ("dtype-not-string", {"a": _t(7, [2], 0, 8)}, F32x2, None, "unknown dtype 7"),
    ("missing-keys", {"a": {"dtype": "F32"}}, F32x2, None, "missing shape, data_offsets"),
    ("entry-not-object", {"a": "F32"}, F32x2, None, "expected an object"),
    ("offsets-not-pair", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}}, F32x2,
     None, "data_offsets must be two"),
    ("header-is-list", [1, 2], b"", None, "must be a JSON object, got list"),
    ("metadata-not-strings", {"__metadata__": {"a": 1}}, b"", None,
     "__metadata__ must map names to strings"),
    ("metadata-is-list", {"__metadata__": ["a"]}, b"", None, "__metadata__ must map"),
    ("not-json", b"{not json", b"", None, "not valid JSON"),
    ("not-utf8", b'{"\xff": 1}', b"", None, "not UTF-8"),
    ("deeply-nested-header", DEEP_JSON, b"", None, "nests too deeply"),
]
# funcgrad's own structure metadata (the safetensors library does not read it)
HOSTILE_TREE = [
    ("tree-too-deep", {"__metadata__": {"funcgrad.tree": DEEP_TREE}}, "nests deeper than"),
    ("tree-json-too-deep", {"__metadata__": {"funcgrad.tree": "[" * 100_000}},
     "funcgrad.tree metadata"),
    ("tree-missing-tensor", {"__metadata__": {"funcgrad.tree": '{"t": "w"}'}},
     "names a tensor 'w' that the file does not hold"),
    ("tree-bad-node", {"__metadata__": {"funcgrad.tree": '{"d": [[1, 2, 3]]}'}},
     "malformed dict entry"),
    ("tree-not-json", {"__metadata__": {"funcgrad.tree": "{"}}, "is not valid JSON"),
    ("tree-unknown-kind", {"__metadata__": {"funcgrad.tree": '{"x": 1}'}}, "malformed node"),
]


@pytest.mark.parametrize("name, header, data, length, message", HOSTILE,
                         ids=[h[0] for h in HOSTILE])
def test_hostile_files_raise_one_error_naming_the_file(tmp_path, name, header, data, length,
                                                       message):
    path = _write(tmp_path / f"{name}.safetensors", header, data, length)
    for as_numpy in (True, False):
        with pytest.raises(CheckpointError) as info:
            funcgrad.load(path, as_numpy=as_numpy)
        assert path in str(info.value) and message in str(info.value), str(info.value)
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name, header, message", HOSTILE_TREE, ids=[h[0] for h in HOSTILE_TREE])
def test_hostile_structure_metadata(tmp_path, name, header, message):
    path = _write(tmp_path / f"{name}.safetensors", header)
    with pytest.raises(CheckpointError, match="funcgrad.load: .*" + name) as info:
        funcgrad.load(path)
    assert message in str(info.value), str(info.value)


@pytest.mark.parametrize("name, header, data, length, message", HOSTILE,
                         ids=[h[0] for h in HOSTILE])
def test_safetensors_rejects_the_same_files(tmp_path, name, header, data, length, message):
    st = pytest.importorskip("safetensors.numpy")
    path = _write(tmp_path / f"{name}.safetensors", header, data, length)
    if name == "deeply-nested-header":
        pytest.skip("the library's JSON parser has its own depth limit")
    with pytest.raises(Exception):
        st.load_file(path)


def test_short_and_empty_files(tmp_path):
    for content in (b"", b"\x01\x02"):
        path = str(tmp_path / "short.safetensors")
        open(path, "wb").write(content)
        with pytest.raises(CheckpointError, match="too short to be a safetensors file"):
            funcgrad.load(path)


def test_valid_edge_cases_still_load(tmp_path):
    header = {"__metadata__": {"format": "np"}, "empty": _t("F32", [0, 3], 0, 0),
              "a": _t("F32", [2], 0, 8), "i": _t("I8", [3], 8, 11), "s": _t("F64", [], 11, 19)}
    data = F32x2 + np.array([1, -2, 3], np.int8).tobytes() + np.float64(0.25).tobytes()
    path = _write(tmp_path / "ok.safetensors", header, data)
    out = funcgrad.load(path, as_numpy=True)
    np.testing.assert_array_equal(out["a"], [1.5, -2.0])
    np.testing.assert_array_equal(out["i"], [1, -2, 3])
    assert out["empty"].shape == (0, 3) and out["s"] == 0.25 and out["s"].shape == ()
    st = pytest.importorskip("safetensors.numpy")
    ref = st.load_file(path)
    for k in ref:
        np.testing.assert_array_equal(out[k], ref[k])


def test_roundtrip_nested_and_bfloat16(tmp_path):
    import ml_dtypes
    path = str(tmp_path / "nested.safetensors")
    state = {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
             "opt": {0: {"m": np.ones(2, ml_dtypes.bfloat16), "step": 3}, "lr": [0.1, None]}}
    funcgrad.save(state, path)
    out = funcgrad.load(path, as_numpy=True)
    np.testing.assert_array_equal(out["w"], state["w"])
    assert out["opt"][0]["step"] == 3 and out["opt"]["lr"] == [0.1, None]
    assert out["opt"][0]["m"].dtype == ml_dtypes.bfloat16


def test_zero_dimensional_arrays_keep_their_shape(tmp_path):
    # flat (plain safetensors) and nested (funcgrad's tree metadata), funcgrad and NumPy values
    flat, nested = str(tmp_path / "flat.safetensors"), str(tmp_path / "nested.safetensors")
    funcgrad.save({"s": jnp.float32(3.5), "n": np.int32(-4), "v": jnp.ones(2)}, flat)
    funcgrad.save({"opt": {"step": jnp.asarray(7, jnp.int32), "m": jnp.zeros(3)}}, nested)
    out = funcgrad.load(flat)
    assert out["s"].shape == () and float(out["s"]) == 3.5 and out["v"].shape == (2,)
    assert out["n"].shape == () and int(out["n"]) == -4 and out["n"].dtype == np.int32
    back = funcgrad.load(nested)["opt"]
    assert back["step"].shape == () and int(back["step"]) == 7 and back["m"].shape == (3,)


def test_zero_dimensional_arrays_read_by_safetensors(tmp_path):
    flat = str(tmp_path / "flat.safetensors")
    funcgrad.save({"s": jnp.float32(3.5)}, flat)
    st = pytest.importorskip("safetensors.numpy")
    assert st.load_file(flat)["s"].shape == ()


def test_save_into_missing_directory_names_the_target(tmp_path):
    target = str(tmp_path / "missing" / "model.safetensors")
    with pytest.raises(FileNotFoundError) as info:
        funcgrad.save({"w": np.ones(2, np.float32)}, target)
    msg = str(info.value)
    assert target in msg and "does not exist" in msg and ".tmp" not in msg
    assert info.value.filename == target


def test_save_onto_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        funcgrad.save({"w": np.ones(2, np.float32)}, str(tmp_path))


def test_save_permission_error_names_the_target(tmp_path, monkeypatch):
    import tempfile

    def refuse(**kwargs):
        raise PermissionError(13, "Permission denied", os.path.join(kwargs["dir"], ".tmp-x"))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    target = str(tmp_path / "model.safetensors")
    with pytest.raises(PermissionError) as info:
        funcgrad.save({"w": np.ones(2, np.float32)}, target)
    assert target in str(info.value) and "Permission denied" in str(info.value)
    assert ".tmp" not in str(info.value) and info.value.filename == target


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_save_into_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        target = str(ro / "model.safetensors")
        with pytest.raises(PermissionError) as info:
            funcgrad.save({"w": np.ones(2, np.float32)}, target)
        assert target in str(info.value) and ".tmp" not in str(info.value)
    finally:
        ro.chmod(0o700)


def test_failed_replace_keeps_the_old_file(tmp_path, monkeypatch):
    target = str(tmp_path / "model.safetensors")
    funcgrad.save({"w": np.ones(2, np.float32)}, target)

    def fail(src, dst):
        raise OSError(28, "No space left on device", src)
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError) as info:
        funcgrad.save({"w": np.zeros(2, np.float32)}, target)
    assert target in str(info.value) and "No space left" in str(info.value)
    assert ".tmp" not in str(info.value)
    monkeypatch.undo()
    np.testing.assert_array_equal(funcgrad.load(target, as_numpy=True)["w"], [1, 1])
    assert os.listdir(tmp_path) == ["model.safetensors"]
