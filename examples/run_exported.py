"""Run a funcgrad export artifact with jaxlib and NumPy alone (no funcgrad import).

This is what any PJRT host does with a ``.fgx`` file (format: docs/export.md): read the
preamble and the JSON header, check the format version, take the StableHLO portable artifact
of the platform, set the symbolic dimensions to the sizes of the inputs, compile with jaxlib's
client and run it on the stored weights followed by the inputs.

    python examples/run_exported.py model.fgx                     # random inputs, b=2
    python examples/run_exported.py model.fgx --sizes b=8
    python examples/run_exported.py model.fgx --inputs in.npz --outputs out.npz

``in.npz`` holds the flat argument leaves as ``arg0, arg1, ...``; ``out.npz`` receives the
flat outputs as ``out0, out1, ...``.
"""
import argparse
import json
import re
import struct
import sys
import zlib

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _chlo, _jax_mlir_ext, _stablehlo

READS_FORMAT_VERSIONS = (1, 1)
SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
                      "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}


def read_artifact(path):
    """(header, sections) of a .fgx file, checking magic, version, lengths and CRCs."""
    data = open(path, "rb").read()
    magic, version, header_crc, n = struct.unpack_from("<8sIIQ", data, 0)
    if magic != b"FGEXPORT":
        sys.exit(f"{path}: not a funcgrad export artifact")
    if not READS_FORMAT_VERSIONS[0] <= version <= READS_FORMAT_VERSIONS[1]:
        sys.exit(f"{path}: format version {version}; this script reads "
                 f"{READS_FORMAT_VERSIONS[0]}..{READS_FORMAT_VERSIONS[1]}")
    if zlib.crc32(data[24:24 + n]) != header_crc:
        sys.exit(f"{path}: the header is corrupt")
    header = json.loads(data[24:24 + n])
    body = data[24 + n:]
    sections = {}
    for name, s in header["sections"].items():
        chunk = body[s["offset"]:s["offset"] + s["length"]]
        if len(chunk) != s["length"] or zlib.crc32(chunk) != s["crc32"]:
            sys.exit(f"{path}: section {name} is truncated or corrupt")
        sections[name] = chunk
    return header, sections


def read_weights(blob, names):
    """The stored weights (a safetensors blob), in the order the module takes them."""
    (n,) = struct.unpack_from("<Q", blob, 0)
    table = json.loads(blob[8:8 + n])
    out = []
    for name in names:
        info = table[name]
        start, end = info["data_offsets"]
        dtype = np.dtype(SAFETENSORS_DTYPES[info["dtype"]]).newbyteorder("<")
        out.append(np.frombuffer(blob[8 + n + start:8 + n + end], dtype).reshape(info["shape"]))
    return out


def dim_terms(dim):
    """(coefficient, {symbol: power}) of a dimension written as an int or 'c*b*t'."""
    if isinstance(dim, int):
        return dim, {}
    coeff, powers = 1, {}
    for factor in dim.replace(" ", "").split("*"):
        if factor.isdigit():
            coeff *= int(factor)
        elif factor:
            powers[factor] = powers.get(factor, 0) + 1
    return coeff, powers


def solve_sizes(in_avals, shapes):
    """Symbol values from the input shapes (dimensions of the form c*b)."""
    sizes = {}
    for aval, shape in zip(in_avals, shapes):
        for dim, actual in zip(aval["shape"], shape):
            coeff, powers = dim_terms(dim)
            if len(powers) == 1 and list(powers.values()) == [1]:
                sizes[next(iter(powers))] = actual // coeff
    return sizes


def evaluate(dim, sizes):
    coeff, powers = dim_terms(dim)
    for name, p in powers.items():
        coeff *= sizes[name] ** p
    return coeff


# Integers of the module text: tensor dimensions, other integers, decimal floats (see
# docs/export.md, "Symbolic dimensions"); multiples of the symbols' primes are sizes.
TOKEN = re.compile(r"(?P<dim>(?<=[<x])\d+(?=x))"
                   r"|(?P<float>(?<![\w.%#^@$\-])\d+\.\d*(?:[eE][-+]?\d+)?(?![\w.]))"
                   r"|(?P<int>(?<![\w.%#^@$\-])\d+(?![\w.]))")


def specialize(text, primes, sizes):
    """The module text with every size written at the symbols' primes rewritten for sizes."""
    def replace(m):
        tok = m.group(0)
        value = float(tok) if m.lastgroup == "float" else int(tok)
        if m.lastgroup == "float" and (not value.is_integer() or abs(value) >= 2 ** 53):
            return tok
        n, scale = int(value), 1
        for name, prime in primes.items():
            while n and n % prime == 0:
                n //= prime
                scale *= sizes[name]
        if scale == 1 and n == int(value):
            return tok
        return f"{n * scale}.0" if m.lastgroup == "float" else str(n * scale)
    return TOKEN.sub(replace, text) if primes else text


def module_text(portable):
    """The StableHLO text of a portable artifact (deserialized in an MLIR context)."""
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    with ir.Context() as ctx:
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
        _stablehlo.register_dialect(ctx, load=True)
        _chlo.register_dialect(ctx, load=True)
        return str(_jax.mlir.deserialize_portable_artifact(portable))


class OneDevice(_jax.SingleDeviceSharding):
    """The placement jaxlib's runtime wants with each buffer copied to the device."""

    def _to_xla_hlo_sharding(self, ndim):
        return xc.HloSharding.replicate()

    @property
    def _device_assignment(self):
        return (self._device,)

    @property
    def device_set(self):
        return {self._device}

    @property
    def memory_kind(self):
        return None

    def is_fully_replicated(self):
        return True

    def is_fully_addressable(self):
        return True

    def devices_indices_map(self, shape):
        return {self._device: (slice(None),) * len(shape)}


class HostAval:
    def __init__(self, array):
        self.shape, self.dtype, self.weak_type = array.shape, array.dtype, False


def run(path, inputs, platform="cpu"):
    """Run the artifact at ``path`` on the flat ``inputs`` (NumPy arrays); returns outputs."""
    header, sections = read_artifact(path)
    if platform not in header["platforms"]:
        sys.exit(f"{path}: exported for {header['platforms']}, not {platform}")
    sizes = solve_sizes(header["in_avals"], [x.shape for x in inputs])
    text = module_text(sections[header["modules"][platform]])
    text = specialize(text, header["symbols"], sizes)
    weights = read_weights(sections["weights"], header["weight_names"])

    _jax.jax_jit.set_enable_x64_state(_jax.config.Config("run_exported_x64", True,
                                                         include_in_jit_key=True))
    client = xc.make_cpu_client()
    if "custom_call @lapack_" in text:      # jaxlib's LAPACK kernels, for linear algebra
        from jaxlib.cpu import _lapack
        _lapack.initialize()
        for name, capsule in _lapack.registrations().items():
            if name.endswith("_ffi"):
                _jax.register_custom_call_target(name, capsule, "cpu", api_version=1)
    device = client.devices()[0]
    options = xc.CompileOptions()
    options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    exe = client.compile_and_load(text, _jax.DeviceList((device,)), options)
    args = []
    for x in list(weights) + list(inputs):
        x = np.ascontiguousarray(x)
        args.append(_jax.batched_device_put(HostAval(x), OneDevice(device), [x], [device],
                                            True, False))
    results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    outs = [np.asarray(r[0]) for r in results]
    for out, aval in zip(outs, header["out_avals"]):
        expected = tuple(evaluate(d, sizes) for d in aval["shape"])
        assert out.shape == expected, (out.shape, expected)
    return outs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--sizes", default="", help="symbol sizes for random inputs: b=8,t=3")
    parser.add_argument("--inputs", help=".npz with arg0, arg1, ...")
    parser.add_argument("--outputs", help="write the outputs to this .npz")
    opts = parser.parse_args()
    header, _ = read_artifact(opts.artifact)
    if opts.inputs:
        with np.load(opts.inputs) as f:
            inputs = [f[f"arg{i}"] for i in range(len(header["in_avals"]))]
    else:
        sizes = {s: 2 for s in header["symbols"]}
        sizes.update({k: int(v) for k, v in (kv.split("=") for kv in opts.sizes.split(",")
                                             if kv)})
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal([evaluate(d, sizes) for d in a["shape"]])
                  .astype(a["dtype"]) for a in header["in_avals"]]
    outs = run(opts.artifact, inputs)
    print(f"{header['fun_name']}: inputs {[x.shape for x in inputs]} -> outputs "
          f"{[o.shape for o in outs]}")
    for i, o in enumerate(outs):
        print(f"out{i}:", np.array2string(o, precision=4, threshold=20))
    if opts.outputs:
        np.savez(opts.outputs, **{f"out{i}": o for i, o in enumerate(outs)})


if __name__ == "__main__":
    main()
