"""The artifact file: versioning (a committed artifact of this release loads and runs forever;
a newer format fails clearly), corrupt and truncated files, atomic saves, loading in a fresh
process without the model's source, and running it with jaxlib and NumPy alone."""
import json
import os
import pathlib
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, nn
from funcgrad.export import artifact

DATA = pathlib.Path(__file__).resolve().parent / "data"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _small():
    return export.export(lambda x: jnp.sin(x) * 2.0, vjp_order=1)(np.zeros(3, np.float32))


def test_the_committed_v1_artifact_loads_and_runs():
    raw = (DATA / "v1_mlp.fgx").read_bytes()
    assert raw[:8] == b"FGEXPORT" and struct.unpack_from("<I", raw, 8)[0] == 1
    exp = export.load(DATA / "v1_mlp.fgx")
    assert exp.platforms == ("cpu", "cuda") and exp.vjp_order == 1
    assert exp.weight_names == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    want = np.load(DATA / "v1_mlp_expected.npz")
    for b in (1, 5):
        x = want[f"x{b}"]
        np.testing.assert_allclose(exp.call(x), want[f"y{b}"], rtol=1e-5, atol=1e-6)
        g = funcgrad.grad(lambda x: jnp.sum(exp.call(x) ** 2))(x)
        np.testing.assert_allclose(g, want[f"g{b}"], rtol=1e-4, atol=1e-5)


def _with_version(blob, version):
    """``blob`` rewritten to claim format ``version`` (preamble and header)."""
    (n,) = struct.unpack_from("<Q", blob, 16)
    header = json.loads(blob[24:24 + n])
    header["format_version"] = version
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return _with_header(blob, text, version)


def _with_header(blob, text, version=1):
    """``blob`` with header bytes ``text`` (and a preamble that matches them)."""
    (n,) = struct.unpack_from("<Q", blob, 16)
    return blob[:8] + struct.pack("<IIQ", version, zlib.crc32(text), len(text)) + text + \
        blob[24 + n:]


def test_an_artifact_from_a_newer_funcgrad_fails_clearly():
    blob = _small().serialize()
    assert export.deserialize(_with_version(blob, 1)).call(np.zeros(3, np.float32)) is not None
    with pytest.raises(export.ExportFormatError,
                       match="format version 2, newer than the versions this funcgrad reads "
                             r"\(1 to 1\).*upgrade funcgrad"):
        export.deserialize(_with_version(blob, 2))
    with pytest.raises(export.ExportFormatError, match="no longer supported"):
        export.deserialize(_with_version(blob, 0))


def test_corrupt_artifacts_fail_clearly(tmp_path):
    blob = bytearray(_small().serialize())
    with pytest.raises(export.ExportFormatError, match="not a funcgrad export artifact"):
        export.deserialize(b"PK\x03\x04" + bytes(blob[4:]))
    flipped = bytearray(blob)
    flipped[-20] ^= 0xFF          # inside the last section
    with pytest.raises(export.ExportFormatError, match="fails its CRC-32 check.*corrupt"):
        export.deserialize(bytes(flipped))
    bad_header = bytearray(blob)
    bad_header[30] ^= 0x01
    with pytest.raises(export.ExportFormatError, match="header fails its CRC-32 check"):
        export.deserialize(bytes(bad_header))
    (n,) = struct.unpack_from("<Q", blob, 16)
    with pytest.raises(export.ExportFormatError, match="not valid UTF-8 JSON"):
        export.deserialize(_with_header(bytes(blob), b"#" + bytes(blob[25:24 + n])))
    path = tmp_path / "bad.fgx"
    path.write_bytes(bytes(flipped))
    with pytest.raises(export.ExportFormatError, match="bad.fgx.*corrupt"):
        export.load(path)


def test_hostile_headers_fail_clearly():
    blob = _small().serialize()
    (n,) = struct.unpack_from("<Q", blob, 16)
    header = json.loads(blob[24:24 + n])
    for change, message in ((dict(symbols={"b": 1}), "not the primes"),
                            (dict(in_tree={"x": 1}), "malformed tree"),
                            (dict(weight_names=["missing"]), "weight 'missing' is missing"),
                            (dict(platforms=["tpu"]), "module of platform 'tpu' is missing"),
                            (dict(in_avals=[{"shape": [-1], "dtype": "float32"}]),
                             "bad dimension -1")):
        text = json.dumps(dict(header, **change)).encode()
        with pytest.raises(export.ExportFormatError, match=message):
            export.deserialize(_with_header(blob, text + b" " * (-len(text) % 8)))


def test_every_flipped_byte_is_detected():
    blob = _small().serialize()
    x = np.linspace(0, 1, 3, dtype=np.float32)
    assert export.deserialize(blob).call(x) is not None
    positions = np.random.default_rng(4).choice(len(blob), size=60, replace=False)
    for pos in sorted(set(positions) | {8, 12, 16, len(blob) - 1}):
        flipped = bytearray(blob)
        flipped[pos] ^= 0x10
        with pytest.raises(export.ExportFormatError):
            export.deserialize(bytes(flipped))


def test_truncated_artifacts_fail_clearly():
    blob = _small().serialize()
    (n,) = struct.unpack_from("<Q", blob, 16)
    for cut in (0, 7, 23, 24 + n // 2, 24 + n + 3, len(blob) - 1):
        with pytest.raises(export.ExportFormatError, match="too short|truncated"):
            export.deserialize(blob[:cut])
    with pytest.raises(export.ExportFormatError, match="trailing bytes"):
        export.deserialize(blob + b"\0" * 8)


def test_the_header_is_json_and_the_weights_safetensors():
    model = nn.Linear(2, 3)
    exp = export.export(model)(np.zeros((1, 2), np.float32))
    header, sections = artifact.unpack(exp.serialize(), "test")
    assert header["format_version"] == artifact.FORMAT_VERSION
    assert header["in_avals"] == [{"shape": [1, 2], "dtype": "float32"}]
    assert header["weight_names"] == ["weight", "bias"]
    assert sections["module.cpu" if "cpu" in header["platforms"] else "module.cuda"][:4] \
        == b"ML\xefR"                       # MLIR bytecode (a StableHLO portable artifact)
    (hn,) = struct.unpack_from("<Q", sections["weights"], 0)
    table = json.loads(sections["weights"][8:8 + hn])
    assert table["weight"] == {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]}
    start = 8 + hn + table["weight"]["data_offsets"][0]
    np.testing.assert_array_equal(
        np.frombuffer(sections["weights"][start:start + 24], np.float32).reshape(3, 2),
        model.weight)


def test_a_failed_save_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "model.fgx"
    export.save(_small(), path)
    before = path.read_bytes()
    other = export.export(lambda x: x + 1.0)(np.zeros(5, np.float32))

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        export.save(other, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.fgx"]   # no temporary left
    export.save(other, path)
    np.testing.assert_allclose(export.load(path).call(np.zeros(5, np.float32)), np.ones(5))
    with pytest.raises(TypeError, match="expected an Exported"):
        export.save({"not": "exported"}, path)


_LOADER = """
import sys
import numpy as np
import funcgrad, funcgrad.numpy as jnp
from funcgrad import export
exp = export.load(sys.argv[1])
x = np.load(sys.argv[2])["x"]
g = funcgrad.grad(lambda x: jnp.sum(exp.call(x) ** 2))(x)
solve = export.load(sys.argv[4])      # calls LAPACK kernels nobody registered here yet
a = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
np.savez(sys.argv[3], y=np.asarray(exp.call(x)), g=np.asarray(g),
         y_jit=np.asarray(funcgrad.jit(exp.call)(x)),
         solved=np.asarray(solve.call(a, np.array([3.0, 5.0], np.float32))))
print(type(exp).__name__, exp.fun_name, "LocalNet" in dir(sys.modules["__main__"]))
"""


@pytest.mark.slow
def test_load_in_a_fresh_process_without_the_model_source(tmp_path):
    class LocalNet(nn.Module):         # exists only in this process, inside this test
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 5)
            self.b = nn.Linear(5, 2)

        def forward(self, x):
            return self.b(nn.functional.gelu(self.a(x))) * 0.5

    model = LocalNet()
    spec = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32)
    export.save(export.export(model, vjp_order=1)(spec), tmp_path / "net.fgx")
    x = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    solve = export.export(jnp.linalg.solve)(np.eye(2, dtype=np.float32), np.ones(2, np.float32))
    export.save(solve, tmp_path / "solve.fgx")
    proc = subprocess.run([sys.executable, "-c", _LOADER, str(tmp_path / "net.fgx"),
                           str(tmp_path / "in.npz"), str(tmp_path / "out.npz"),
                           str(tmp_path / "solve.fgx")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["Exported", "LocalNet", "False"]
    out = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(out["y"], model(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["y_jit"], model(x), rtol=1e-5, atol=1e-6)
    want_g = funcgrad.grad(lambda x: jnp.sum(model(x) ** 2))(x)
    np.testing.assert_allclose(out["g"], want_g, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["solved"], [0.8, 1.4], rtol=1e-5)


def test_the_example_runs_an_artifact_with_jaxlib_and_numpy_alone(tmp_path):
    x = np.load(DATA / "v1_mlp_expected.npz")["x5"]
    np.savez(tmp_path / "in.npz", arg0=x)
    runner = ("import runpy, sys\n"
              "sys.argv = ['run_exported.py'] + sys.argv[1:]\n"
              "runpy.run_path('examples/run_exported.py', run_name='__main__')\n"
              "assert not [m for m in sys.modules if m.startswith('funcgrad')], 'imported'\n")
    proc = subprocess.run([sys.executable, "-c", runner, str(DATA / "v1_mlp.fgx"), "--inputs",
                           str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TinyMLP: inputs [(5, 4)] -> outputs [(5, 3)]" in proc.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["out0"],
                               np.load(DATA / "v1_mlp_expected.npz")["y5"], rtol=1e-5,
                               atol=1e-6)
