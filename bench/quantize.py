"""Quantized inference next to float32, funcgrad and PyTorch side by side in one run.

Row (1): a Linear layer, 16x1024 input @ 1024x1024 weight (+ bias), float32 against dynamic
int8 (weights quantized once per channel, activations per row at run time): funcgrad's
``jit(quantize(f, QuantizeConfig()))`` and PyTorch's
``torch.ao.quantization.quantize_dynamic`` (when torch is installed; its default x86 engine,
fbgemm). Also funcgrad's weight-only int8 (dequantize into a float product).

Row (2): the character LSTM language model of examples/quantization.py (embedding 48, LSTM
128, trained briefly on examples/data/tiny_text.txt), inference on the held-out text, float32
against ``quantize_dynamic(model, {LSTM, Linear})``, funcgrad and PyTorch with the same
weights; held-out perplexity, file size.

Row (3): the LeNet of examples/quantization.py (trained on synthetic MNIST-shaped data),
inference on a batch of 64 images, float32 against static int8 (fuse conv+bn+relu, the x86
qconfig, calibration on the same 8 batches, convert), funcgrad and PyTorch's x86 backend with
the same weights; test accuracy, file size.

Each number is the median over ``--repeats`` rounds of the mean time of ``--calls`` calls (ms);
the variants alternate within each round, so the load of a shared machine falls on all alike.
Every row also prints "cpu ms": the least process CPU time per call over the rounds
(all threads of the process counted), which a loaded machine disturbs far less than the wall
time (with PyTorch on one thread both libraries are measured alike).

Row (4), with ``--gpu`` on a machine with an NVIDIA GPU: a 4096x4096 @ 4096x4096 product,
int8 x int8 -> int32 against bfloat16, in funcgrad (``lax.dot_general`` with
``preferred_element_type``, and ``quantize`` of a bfloat16 Linear: dynamic int8 against the
bfloat16 layer), JAX and PyTorch (``torch._int_mm``), each library in its own process (two
runtimes never share the GPU), the processes alternating round by round.

Run: python bench/quantize.py [--repeats 7] [--calls 50] [--threads N] [--rows 1,2,3]
     python bench/quantize.py --gpu [--repeats 5]          (row 4)
"""
import argparse
import functools
import json
import subprocess
import os
import statistics
import sys
import time
import warnings

if "--gpu" not in sys.argv and "--gpu-library" not in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("FUNCGRAD_PLATFORM", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def time_ms(fn, sync, calls):
    """Mean wall and process CPU time of ``calls`` calls of ``fn`` (ms), synchronized at the
    end."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        out = fn()
    sync(out)
    return ((time.perf_counter() - t0) / calls * 1e3, (time.process_time() - c0) / calls * 1e3)


def funcgrad_variants(x, w, b):
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad.quantize import QuantizeConfig

    def linear(x):
        return x @ w.T + b
    xs = jnp.asarray(x)
    sync = lambda o: o.block_until_ready()
    out = {}
    for name, fn in (("float32", funcgrad.jit(linear)),
                     ("dynamic int8", funcgrad.jit(funcgrad.quantize(linear, QuantizeConfig()))),
                     ("weight-only int8", funcgrad.jit(funcgrad.quantize(
                         linear, QuantizeConfig(activation="none"))))):
        out[name] = (functools.partial(fn, xs), sync, lambda fn=fn: np.asarray(fn(xs)))
    return out


def torch_variants(x, w, b):
    try:
        import torch
    except ImportError:
        return {}
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                      dtype=torch.qint8)
    xt = torch.from_numpy(x)

    def call(m):
        with torch.inference_mode():
            return m(xt)
    return {name: (functools.partial(call, m), lambda o: None,
                   lambda m=m: call(m).numpy())
            for name, m in (("float32", lin), ("dynamic int8", qlin))}


def measure(variants, repeats, calls, cpu=None):
    """Median (over ``repeats`` rounds, every variant once per round, interleaved so that the
    machine's load falls on all alike) of each variant's mean call time; ``cpu`` (a dict), if
    given, receives each variant's least CPU time per call."""
    for fn, sync, _ in variants.values():
        for _ in range(3):
            sync(fn())
    times = {key: [] for key in variants}
    for _ in range(repeats):
        for key, (fn, sync, _) in variants.items():
            times[key].append(time_ms(fn, sync, calls))
    if cpu is not None:
        cpu.update({key: min(c for _, c in t) for key, t in times.items()})
    return {key: statistics.median(w for w, _ in t) for key, t in times.items()}


def row1(args):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 1024)).astype(np.float32)
    w = (rng.normal(size=(1024, 1024)) / 32).astype(np.float32)
    b = (rng.normal(size=1024) / 10).astype(np.float32)
    ref = x @ w.T + b
    variants = {("funcgrad", k): v for k, v in funcgrad_variants(x, w, b).items()}
    variants.update({("torch", k): v for k, v in torch_variants(x, w, b).items()})
    cpu = {}
    ms = measure(variants, args.repeats, args.calls, cpu)
    err = {key: float(np.abs(v[2]() - ref).max()) for key, v in variants.items()}
    fg = {k: (ms[f, k], cpu[f, k], err[f, k]) for f, k in ms if f == "funcgrad"}
    tc = {k: (ms[f, k], cpu[f, k], err[f, k]) for f, k in ms if f == "torch"}
    print("(1) Linear 16x1024 @ 1024x1024, CPU; ms per call (median of "
          f"{args.repeats} x {args.calls} calls), cpu ms (least process CPU time per call), "
          "max |error| against NumPy float32")
    if tc:
        import torch
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, quantized engine "
              f"{torch.backends.quantized.engine}; {os.cpu_count()} CPUs")
    print(f"{'variant':<18} {'funcgrad ms':>12} {'cpu ms':>7} {'error':>7} {'torch ms':>9} "
          f"{'cpu ms':>7} {'error':>7}")
    for name in ("float32", "dynamic int8", "weight-only int8"):
        f_ms, f_cpu, f_err = fg[name]
        t = tc.get(name)
        t_str = f"{t[0]:9.3f} {t[1]:7.3f} {t[2]:7.4f}" if t else f"{'-':>9} {'-':>7} {'-':>7}"
        print(f"{name:<18} {f_ms:12.3f} {f_cpu:7.3f} {f_err:7.4f} {t_str}")
    (f32, f32_cpu, _), (i8, i8_cpu, _) = fg["float32"], fg["dynamic int8"]
    print(f"funcgrad int8 / float32: {i8 / f32:.2f}x time (cpu {i8_cpu / f32_cpu:.2f}x)", end="")
    if tc:
        t_ms, t_cpu, _ = tc["dynamic int8"]
        print(f"; funcgrad int8 / torch int8: {i8 / t_ms:.2f}x time (cpu {i8_cpu / t_cpu:.2f}x)")
    else:
        print(" (torch not installed)")



# --- rows (2) and (3): the models of examples/quantization.py --------------------------------------
def _examples():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "examples"))
    import quantization as ex
    return ex


def _file_kb_torch(model):
    import io
    import torch
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return len(buf.getvalue()) / 1024


def _torch_char_lm(ex, model):
    import torch

    class TorchCharLM(torch.nn.Module):
        def __init__(self, vocab, emb, hidden):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, emb)
            self.lstm = torch.nn.LSTM(emb, hidden, batch_first=True)
            self.head = torch.nn.Linear(hidden, vocab)

        def forward(self, idx):
            return self.head(self.lstm(self.embed(idx))[0])
    vocab, emb = model.embed.weight.shape
    t = TorchCharLM(vocab, emb, model.lstm.hidden_size)
    t.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in
                       model.state_dict().items()})
    return t.eval()


def _torch_lenet(model):
    import torch
    import torch.ao.quantization as tq

    class TorchLeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            nn = torch.nn
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv1, self.bn1, self.relu1 = nn.Conv2d(1, 6, 5, padding=2), \
                nn.BatchNorm2d(6), nn.ReLU()
            self.conv2, self.bn2, self.relu2 = nn.Conv2d(6, 16, 5), nn.BatchNorm2d(16), nn.ReLU()
            self.fc1, self.relu3 = nn.Linear(400, 120), nn.ReLU()
            self.fc2, self.relu4 = nn.Linear(120, 84), nn.ReLU()
            self.fc3 = nn.Linear(84, 10)
            self.pool = nn.MaxPool2d(2)

        def forward(self, x):
            x = self.quant(x)
            x = self.pool(self.relu1(self.bn1(self.conv1(x))))
            x = self.pool(self.relu2(self.bn2(self.conv2(x))))
            x = x.reshape(x.shape[0], -1)
            return self.dequant(self.fc3(self.relu4(self.fc2(self.relu3(self.fc1(x))))))
    t = TorchLeNet()
    t.load_state_dict({k: torch.from_numpy(np.asarray(v).copy()) for k, v in
                       model.state_dict().items()})
    return t.eval()


def row2(args):
    import funcgrad
    from funcgrad import nn
    from funcgrad import quantization as fq
    ex = _examples()
    model, hx, hy, nll = ex.train_char_lm(args.lm_steps)
    qmodel = fq.quantize_dynamic(model, {nn.LSTM, nn.Linear})
    logits = funcgrad.jit(lambda m, x: m(x)[0])
    sync = lambda o: o.block_until_ready()      # noqa: E731
    variants = {("funcgrad", name): (functools.partial(logits, m, hx), sync,
                                     lambda m=m: float(np.exp(float(nll(m, hx, hy)))),
                                     ex.file_kb(m))
                for name, m in (("float32", model), ("dynamic int8", qmodel))}
    try:
        import torch
        tmodel = _torch_char_lm(ex, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tq = torch.ao.quantization.quantize_dynamic(tmodel, {torch.nn.LSTM, torch.nn.Linear},
                                                        dtype=torch.qint8)
        tx = torch.from_numpy(np.asarray(hx).astype(np.int64))
        ty = torch.from_numpy(np.asarray(hy).astype(np.int64))

        def call(m):
            with torch.inference_mode():
                return m(tx)

        def ppl(m):
            out = call(m)
            return float(torch.exp(torch.nn.functional.cross_entropy(
                out.reshape(-1, out.shape[-1]), ty.reshape(-1))))
        for name, m in (("float32", tmodel), ("dynamic int8", tq)):
            variants["torch", name] = (functools.partial(call, m), lambda o: None,
                                       functools.partial(ppl, m), _file_kb_torch(m))
    except ImportError:
        pass
    _table(f"(2) LSTM LM inference ({hx.shape[0]}x{hx.shape[1]} characters), float32 vs "
           f"dynamic int8", "perplexity", variants, args)


def row3(args):
    import funcgrad
    from funcgrad import quantization as fq
    ex = _examples()
    model, train_set, test = ex.train_lenet(args.lenet_epochs)
    calib = ex.calibration_batches(train_set)
    forward = funcgrad.jit(lambda m, x: m(x))
    prepared = fq.prepare(fq.fuse_modules(model, ex.FUSE), fq.get_default_qconfig("x86"))
    for x in calib:
        forward(prepared, x)
    static = fq.convert(prepared)
    x64 = next(ex.batches(test, 64))[0]
    sync = lambda o: o.block_until_ready()      # noqa: E731
    variants = {("funcgrad", name): (functools.partial(forward, m, x64), sync,
                                     functools.partial(ex.accuracy, m, test), ex.file_kb(m))
                for name, m in (("float32", model), ("static int8", static))}
    try:
        import torch
        import torch.ao.quantization as tq
        torch.backends.quantized.engine = "x86"
        tmodel = _torch_lenet(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fused = tq.fuse_modules(tmodel, [n for n in ex.FUSE])
            fused.qconfig = tq.get_default_qconfig("x86")
            tp = tq.prepare(fused)
            for x in calib:
                tp(torch.from_numpy(np.asarray(x)))
            tstatic = tq.convert(tp)
        tx = torch.from_numpy(np.asarray(x64))
        xs, ys = zip(*[(np.asarray(x), np.asarray(y)) for x, y in ex.batches(test, 256)])

        def call(m, x=tx):
            with torch.inference_mode():
                return m(x)

        def acc(m):
            hits = sum(int((call(m, torch.from_numpy(x)).argmax(1).numpy() == y).sum())
                       for x, y in zip(xs, ys))
            return hits / len(test)
        for name, m in (("float32", tmodel), ("static int8", tstatic)):
            variants["torch", name] = (functools.partial(call, m), lambda o: None,
                                       functools.partial(acc, m), _file_kb_torch(m))
    except ImportError:
        pass
    _table("(3) LeNet inference (64 images), float32 vs static int8 (x86 qconfig)", "accuracy",
           variants, args)


def _table(title, metric, variants, args):
    cpu = {}
    ms = measure({k: v[:3] for k, v in variants.items()}, args.repeats, args.calls, cpu)
    print(f"\n{title}; ms per call (median of {args.repeats} x {args.calls} calls)")
    print(f"{'library':<9} {'variant':<14} {'ms':>9} {'cpu ms':>9} {metric:>11} {'size KiB':>9}")
    for (lib, name), v in variants.items():
        print(f"{lib:<9} {name:<14} {ms[lib, name]:9.3f} {cpu[lib, name]:9.3f} {v[2]():11.4f} "
              f"{v[3]:9.1f}")
    names = sorted({n for _, n in variants}, key=lambda n: n != "float32")
    f32, q = names[0], names[1]
    line = f"funcgrad {q} / float32: {ms['funcgrad', q] / ms['funcgrad', f32]:.2f}x time"
    if ("torch", q) in ms:
        line += f"; funcgrad {q} / torch {q}: {ms['funcgrad', q] / ms['torch', q]:.2f}x time"
        line += (f" (cpu: {cpu['funcgrad', q] / cpu['funcgrad', f32]:.2f}x float32, "
                 f"{cpu['funcgrad', q] / cpu['torch', q]:.2f}x torch)")
    print(line)


# --- row (4): int8 against bfloat16 products on a GPU ---------------------------------------------
GPU_N = int(os.environ.get("FUNCGRAD_BENCH_GPU_N", 4096))


def _device_name(lib):
    if lib == "torch":
        import torch
        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    mod = __import__(lib)
    d = mod.devices()[0]
    return f"{d.platform}: {getattr(d, 'device_kind', d)}"


def _gpu_operands():
    rng = np.random.default_rng(0)
    a8 = rng.integers(-127, 128, size=(GPU_N, GPU_N), dtype=np.int8)
    b8 = rng.integers(-127, 128, size=(GPU_N, GPU_N), dtype=np.int8)
    af = (rng.normal(size=(GPU_N, GPU_N)) / 8).astype(np.float32)
    bf = (rng.normal(size=(GPU_N, GPU_N)) / 64).astype(np.float32)
    return a8, b8, af, bf


def _gpu_funcgrad(a8, b8, af, bf):
    import ml_dtypes
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad import lax
    from funcgrad.quantize import QuantizeConfig
    A8, B8 = funcgrad.device_put(a8), funcgrad.device_put(b8)
    A, B = (funcgrad.device_put(v.astype(ml_dtypes.bfloat16)) for v in (af, bf))
    int_mm = funcgrad.jit(lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                       preferred_element_type=jnp.int32))
    bf16_mm = funcgrad.jit(lambda a, b: a @ b)

    def linear(x):
        return x @ B
    q_linear = funcgrad.jit(funcgrad.quantize(linear, QuantizeConfig()))
    sync = lambda o: o.block_until_ready()
    check = {"int8 product": lambda: np.asarray(int_mm(A8, B8)),
             "dynamic int8 Linear": lambda: np.asarray(q_linear(A)).astype(np.float32)}
    return ({"int8 product": functools.partial(int_mm, A8, B8),
             "bf16 product": functools.partial(bf16_mm, A, B),
             "dynamic int8 Linear": functools.partial(q_linear, A),
             "bf16 Linear": functools.partial(funcgrad.jit(linear), A)}, sync, check)


def _gpu_jax(a8, b8, af, bf):
    import jax
    import jax.numpy as jnp
    A8, B8 = jax.device_put(a8), jax.device_put(b8)
    A, B = jax.device_put(af).astype(jnp.bfloat16), jax.device_put(bf).astype(jnp.bfloat16)
    int_mm = jax.jit(lambda a, b: jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                      preferred_element_type=jnp.int32))
    bf16_mm = jax.jit(lambda a, b: a @ b)
    sync = lambda o: o.block_until_ready()
    return ({"int8 product": functools.partial(int_mm, A8, B8),
             "bf16 product": functools.partial(bf16_mm, A, B)}, sync,
            {"int8 product": lambda: np.asarray(int_mm(A8, B8))})


def _gpu_torch(a8, b8, af, bf):
    import torch
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    A8, B8 = torch.from_numpy(a8).to(dev), torch.from_numpy(b8).to(dev)
    A = torch.from_numpy(af).to(dev, torch.bfloat16)
    B = torch.from_numpy(bf).to(dev, torch.bfloat16)
    sync = (lambda o: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda o: None)
    return ({"int8 product": functools.partial(torch._int_mm, A8, B8),
             "bf16 product": functools.partial(torch.matmul, A, B)}, sync,
            {"int8 product": lambda: torch._int_mm(A8, B8).cpu().numpy()})


def gpu_library(name, repeats, calls):
    """One library's row (4) in this process: JSON of ms per call (median of ``repeats``) and
    checksums of the products."""
    a8, b8, af, bf = _gpu_operands()
    fns, sync, check = {"funcgrad": _gpu_funcgrad, "jax": _gpu_jax,
                        "torch": _gpu_torch}[name](a8, b8, af, bf)
    ms = measure({k: (fn, sync, None) for k, fn in fns.items()}, repeats, calls)
    exact = a8[:64].astype(np.int32) @ b8.astype(np.int32)
    ref = af.astype(np.float32) @ bf.astype(np.float32)
    errors = {}
    for key, fn in check.items():
        out = fn()
        errors[key] = (int(np.abs(out[:64] - exact).max()) if key == "int8 product"
                       else float(np.abs(out - ref).max() / np.abs(ref).max()))
    print(json.dumps({"ms": ms, "errors": errors, "device": _device_name(name)}))


def row4(args):
    libs = ["funcgrad"] + [n for n in ("jax", "torch") if _importable(n)]
    results = {lib: [] for lib in libs}
    for _ in range(args.gpu_rounds):
        for lib in libs:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--gpu-library", lib,
                                   "--repeats", str(args.repeats), "--calls", str(args.calls)],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode:
                raise SystemExit(f"row 4, {lib}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
            results[lib].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    flops = 2 * GPU_N ** 3
    print(f"\n(4) {GPU_N}x{GPU_N} @ {GPU_N}x{GPU_N} on the GPU; ms per call (median of "
          f"{args.gpu_rounds} processes x {args.repeats} x {args.calls} calls), T(FL)OP/s; int8 "
          "error: max |difference| from NumPy's int32 product (rows 0-63); Linear error: max "
          "|difference| / max |value| against the float32 product")
    print("devices: " + "; ".join(f"{lib} {runs[0]['device']}" for lib, runs in results.items()))
    print(f"{'library':<9} {'variant':<20} {'ms':>8} {'TOP/s':>7} {'error':>9}")
    ms = {}
    for lib, runs in results.items():
        for key in runs[0]["ms"]:
            ms[lib, key] = statistics.median(r["ms"][key] for r in runs)
            err = runs[-1]["errors"].get(key, "")
            print(f"{lib:<9} {key:<20} {ms[lib, key]:8.3f} {flops / ms[lib, key] / 1e9:7.1f} "
                  f"{err!s:>9}")
    line = (f"funcgrad int8 / bf16 product: {ms['funcgrad', 'int8 product'] / ms['funcgrad', 'bf16 product']:.2f}x"
            f"; dynamic int8 Linear / bf16 Linear: "
            f"{ms['funcgrad', 'dynamic int8 Linear'] / ms['funcgrad', 'bf16 Linear']:.2f}x")
    for lib in libs[1:]:
        line += (f"; funcgrad / {lib}: int8 {ms['funcgrad', 'int8 product'] / ms[lib, 'int8 product']:.2f}x"
                 f", bf16 {ms['funcgrad', 'bf16 product'] / ms[lib, 'bf16 product']:.2f}x")
    print(line)


def _importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--rows", default="1,2,3")
    ap.add_argument("--lm-steps", type=int, default=150)
    ap.add_argument("--lenet-epochs", type=int, default=2)
    ap.add_argument("--gpu", action="store_true", help="row (4) on the GPU instead of rows 1-3")
    ap.add_argument("--gpu-rounds", type=int, default=3)
    ap.add_argument("--gpu-library", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gpu_library:
        return gpu_library(args.gpu_library, args.repeats, args.calls)
    if args.gpu:
        args.rows = "4"
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    rows = {"1": row1, "2": row2, "3": row3, "4": row4}
    print("load average (1, 5, 15 min) at start: %.2f %.2f %.2f" % os.getloadavg())
    for r in args.rows.split(","):
        rows[r](args)
    print("\nload average (1, 5, 15 min) at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
