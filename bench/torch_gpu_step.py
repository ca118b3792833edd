#!/usr/bin/env python3
"""PyTorch's time for the training steps bench_cuda measures (BM_simplecnn_step_*, BM_resnet18_step_*,
BM_gpt_step_*): the same models (SimpleCNN as nn/models/simple.cpp, ResNet-18 for 32x32 inputs as
nn/models/resnet.cpp, batch 128; GPT as nn/models/transformers.cpp, 6 layers, width 384, 6 heads, context
256, vocabulary 65, batch 32), cross-entropy, SGD with momentum 0.9, f32 and autocast f16 with a
GradScaler, on the same GPU; cuBLAS's own f16 GEMM figure (torch.matmul) at 4096 and 8192;
F.scaled_dot_product_attention, causal f16 (32, 6, 256, 64), forward and forward + backward; and a
chain of 30 small ops, eager (the host's cost per launch).
Prints one line per measurement: name, ms per step (TFLOP/s for GEMMs), samples/s. Exits 0 with a note
when PyTorch or a GPU is missing. With --profile MODEL [--amp]: torch.profiler's per-op table of ten steps
of that model, beside which build/.../mdl-profile-step prints mdl's.
"""
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_gpu_step: skipped, PyTorch is not installed")
    sys.exit(0)
if not torch.cuda.is_available():
    print("torch_gpu_step: skipped, PyTorch sees no GPU")
    sys.exit(0)

from torch_gpt import GPT  # noqa: E402 (bench/torch_gpt.py, beside this script)


from torch_models import ResNet18, simple_cnn  # noqa: E402 (bench/torch_models.py, beside this script)


def gemm_tflops(n, seconds=1.0):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    it, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        torch.cuda.synchronize()
        it += 1
    tflops = 2.0 * n ** 3 * it / (time.perf_counter() - start) / 1e12
    print(f"torch_gemm_f16_{n:<18d} {tflops:10.2f} TFLOP/s")


def seconds_per_call(step, seconds):
    """Calls step() (each call synchronised) for about `seconds` after three warm-up calls; the mean time."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        torch.cuda.synchronize()
        n += 1
    return (time.perf_counter() - start) / n


def attention_ms(backward, dtype, seconds=1.0):
    """F.scaled_dot_product_attention, causal, (32, 6, 256, 64): bench_cuda's flash_attention and
    flash_attention_mma pairs (dtype "f16", "bf16" or "f32"; f32 with TF32 off, as the step figures run)."""
    shape = (32, 6, 256, 64)
    t = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    q, k, v = (torch.randn(shape, device="cuda", dtype=t, requires_grad=backward) for _ in range(3))
    go = torch.randn(shape, device="cuda", dtype=t)

    def step():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            y.backward(go)

    ms = 1e3 * seconds_per_call(step, seconds)
    name = f"sdpa_{dtype}_causal_b32_h6_t256_d64_" + ("fwd_bwd" if backward else "fwd")
    print(f"torch_{name:28s} {ms:10.3f} ms/call")


def make_step(model, shape, amp, tokens=None, channels_last=False):
    """One training step of model on a random batch: zero_grad, forward under autocast, backward, step.
    channels_last: the model and the batch in torch.channels_last (bench_cuda's channels_last pair)."""
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = model.to(dev).train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    if tokens:  # (B, T) token ids, a next-token target per position
        x = torch.randint(0, tokens, shape, device=dev)
        y = torch.randint(0, tokens, shape, device=dev).reshape(-1)
    else:
        x = torch.randn(*shape, device=dev)
        y = torch.randint(0, 10, (shape[0],), device=dev)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def time_step(name, model, shape, amp, seconds=2.0, tokens=None, channels_last=False):
    ms = 1e3 * seconds_per_call(make_step(model, shape, amp, tokens, channels_last), seconds)
    samples = shape[0] * (shape[1] if tokens else 1)
    print(f"torch_{name:28s} {ms:10.3f} ms/step {1e3 * samples / ms:12.0f} {'tokens' if tokens else 'images'}/s")


def batch_norm_us(seconds=1.0):
    """Batch norm in training, forward and backward, as bench_cuda's BM_batch_norm_f16."""
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(128, 64, 32, 32, device=dev, dtype=torch.float16, requires_grad=True)
    gy = torch.randn(128, 64, 32, 32, device=dev, dtype=torch.float16)
    bn = nn.BatchNorm2d(64).to(dev)  # f32 parameters and statistics, as under autocast

    def step():
        bn(x).backward(gy)

    print(f"torch_batch_norm_f16{'':14s} {1e6 * seconds_per_call(step, seconds):10.1f} us")


def op_chain_us(seconds=1.0):
    """bench_cuda's cuda_graphs/off/op_chain: 10 rounds of tanh(y * 1.01 + 0.1) on 4096 values, eager,
    synchronised per chain: 30 launches whose time is the host's, not the GPU's."""
    x = torch.randn(4096, device="cuda")

    def chain():
        with torch.no_grad():
            y = x
            for _ in range(10):
                y = torch.tanh(y * 1.01 + 0.1)

    print(f"torch_op_chain{'':20s} {1e6 * seconds_per_call(chain, seconds):10.1f} us")


MODELS = {  # name: (constructor, input shape, vocabulary for token models)
    "simplecnn": (lambda: simple_cnn(), (128, 1, 28, 28), None),
    "resnet18": (lambda: ResNet18(), (128, 3, 32, 32), None),
    "gpt": (lambda: GPT(), (32, 256), 65),
}


def profile_step(model_name, amp, steps=10, rows=25):
    """torch.profiler's per-op table for the step build/mdl-profile-step prints for mdl."""
    from torch.profiler import ProfilerActivity, profile
    make, shape, tokens = MODELS[model_name]
    step = make_step(make(), shape, amp, tokens)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    ms = 1e3 * (time.perf_counter() - start) / steps
    print(f"== torch {model_name} {'amp' if amp else 'f32'}: {ms:.3f} ms/step unprofiled ({steps} steps)")
    torch.cuda.reset_peak_memory_stats()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
            torch.cuda.synchronize()
    averages = prof.key_averages()
    try:
        print(averages.table(sort_by="self_device_time_total", row_limit=rows))
    except (AttributeError, KeyError, ValueError):  # PyTorch before the device_time names
        print(averages.table(sort_by="self_cuda_time_total", row_limit=rows))
    print(f"peak allocated: {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--profile":
        if len(sys.argv) not in (3, 4) or sys.argv[2] not in MODELS or sys.argv[3:] not in ([], ["--amp"]):
            sys.exit(f"usage: torch_gpu_step.py [--profile {{{','.join(MODELS)}}} [--amp]]")
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        profile_step(sys.argv[2], len(sys.argv) == 4)
        return
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)} (cudnn.benchmark on, TF32 off)")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    time_step("simplecnn_step_f32", simple_cnn(), (128, 1, 28, 28), False)
    time_step("simplecnn_step_amp", simple_cnn(), (128, 1, 28, 28), True)
    time_step("resnet18_step_f32", ResNet18(), (128, 3, 32, 32), False)
    time_step("resnet18_step_amp", ResNet18(), (128, 3, 32, 32), True)
    time_step("resnet18_step_amp_channels_last", ResNet18(), (128, 3, 32, 32), True, channels_last=True)
    time_step("gpt_step_f32", GPT(), (32, 256), False, tokens=65)
    time_step("gpt_step_amp", GPT(), (32, 256), True, tokens=65)
    for n in (4096, 8192):
        gemm_tflops(n)
    batch_norm_us()
    op_chain_us()
    for dtype in ("f16", "f32"):
        for backward in (False, True):
            attention_ms(backward, dtype)
    attention_ms(False, "bf16")


if __name__ == "__main__":
    main()
