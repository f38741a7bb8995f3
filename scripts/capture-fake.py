#!/usr/bin/env python3
"""capture-fake.py - a PyTorch program's CUDA allocation trace, captured WITHOUT a GPU.

The workload runs on the meta device (shapes, dtypes and strides, no data) under a TorchDispatchMode
that sees every ATen op after autograd: each output's storage, deduplicated by storage identity (views
and in-place results add nothing), is an allocation of storage.nbytes() bytes (what the op asks the
CUDA caching allocator for: it rounds to 512 bytes itself); a storage whose last reference has gone
(StorageWeakRef.expired(), polled before every op and at the end, with Python's cyclic GC off so
frees are refcount-driven as on the GPU) is a free. The optimizer's and autograd's temporaries are
ops like any other. The trace is allocsim's native format (doc/trace-format.md), stream 0.

What the meta run cannot see is added from UNSEEN below, each entry cited; every added record is
preceded by a phase line "p unseen:KIND" so it can be found (and dropped: allocsim predict's range).

usage:
  capture-fake.py fake WORKLOAD OUTDIR      capture on the meta device (no GPU needed)
  capture-fake.py real WORKLOAD OUTDIR      the same workload on the GPU: memory_stats(), snapshot
  capture-fake.py all OUTDIR [WORKLOAD...]  both, each in its own process with a timeout
                                            (fake runs with CUDA_VISIBLE_DEVICES= : provably no GPU)
  capture-fake.py fakeall|realall|probeall OUTDIR [WORKLOAD...]   one kind only
  capture-fake.py probe WORKLOAD OUTDIR     on the GPU: the allocations inside each op (cuDNN workspaces,
                                            kernel scratch) and the order of its outputs: W.probe.json
  capture-fake.py merge PROBEDIR OUTDIR     cudnn-sm90.json and ops-sm90.json from the W.probe.json
                                            (the capture reads them from traces/predict or
                                            $CAPTURE_FAKE_TABLES; CAPTURE_FAKE_SCRATCH=1 also adds the
                                            other ops' scratch)
  capture-fake.py list                      the workloads
WORKLOAD may also be a Python file defining workload(torch, dev) -> (model, optimizer) (either may be
None): your own training step or inference loop, written with device=dev (the trace is FILE's name
less .py, plus .trace.gz).
"""
import gc, gzip, json, os, subprocess, sys, time, traceback
import concurrent.futures as cf

MiB = 1 << 20
# What a meta run cannot see. Sizes for PyTorch 2.11 on sm_90 (H100/H200).
UNSEEN = {
    # aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize(): default
    # ":4096:2:16:8" (8.125 MiB), "32MiB for Hopper" (sm90: 4096 * 8 * 1024); setWorkspaceForHandle()
    # allocates it from the caching allocator at the first cuBLAS call per (handle, stream) and keeps
    # it (cublas_handle_stream_to_workspace) until clearCublasWorkspaces().
    "cublas-workspace": 4096 * 8 * 1024,
    # same file, parseCUDABlasLtWorkspaceSize(): CUBLASLT_WORKSPACE_SIZE default 1024 KiB
    # ("default size in KiB according to #73328"); getCUDABlasLtWorkspace() allocates it per
    # (handle, stream) at the first cublasLt call (addmm with a 1-D bias: Blas.cpp's useLtInterface)
    # unless TORCH_CUBLASLT_UNIFIED_WORKSPACE=1.
    "cublaslt-workspace": 1024 * 1024,
}
# Not added (doc/predict.md's table says why): the CUDA context (driver memory, never in the caching
# allocator's reserved bytes); cuDNN workspaces (aten/src/ATen/native/cudnn/Conv_v8.cpp: allocated per
# call from the caching allocator, size chosen by cuDNN's heuristics on the device); SDPA/flash
# workspaces; NCCL buffers (cudaMalloc/cuMem outside the allocator); kernel scratch (at::empty inside
# CUDA kernels: reductions' staging, embedding backward's sort buffers).
BLAS_OPS = {"mm", "addmm", "bmm", "baddbmm", "addmv", "mv", "dot", "vdot", "addbmm", "_addmm_activation", "addr",
            "_scaled_mm", "_int_mm"}
LT_OPS = {"addmm", "_addmm_activation"}
# cuDNN convolutions: the ops the dispatch mode sees (forward; backward-data and backward-weight are one
# convolution_backward op, each with its own workspace inside). aten/src/ATen/native/cudnn/Conv_v8.cpp
# (v2.11.0): run_single_conv() allocates the chosen engine's workspace from the caching allocator
# (c10::cuda::CUDACachingAllocator::get()->allocate(workspace_size)) and frees it when the call returns;
# the size is cuDNN's heuristics' choice on the device, so it is measured (capture-fake.py probe, on the
# GPU) per convolution key into traces/predict/cudnn-sm90.json.
CONV_OPS = {"convolution", "convolution_backward"}
# The order in which a CUDA kernel allocates its outputs, where it is not their order in the result
# (the probe's tables take precedence): native_dropout allocates the bool mask before the output
# (aten/src/ATen/native/cuda/Dropout.cu, dropout_cuda(): mask = at::empty_like(..., kBool) first;
# measured: gpt2_bf16's real trace and the probe, 222 pairs, every one mask first).
ORDER = {"native_dropout/2": [1, 0]}
HERE = os.path.dirname(os.path.abspath(__file__))


def op_key(torch, name, args, kwargs):
    """A call's key: op, every tensor's dtype/shape/stride/offset, every other argument, cuDNN's flags.
    The same on the meta device and on CUDA (the device itself is left out)."""
    def d(x):
        if isinstance(x, torch.Tensor):
            return "T%s%s%s+%d" % (str(x.dtype)[6:], tuple(x.shape), x.stride(), x.storage_offset())
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(d(y) for y in x) + "]"
        if isinstance(x, torch.device):
            return "dev"
        return repr(x)
    b = torch.backends.cudnn
    return "%s(%s;%s)|bench=%d,det=%d,tf32=%d" % (name, ",".join(d(a) for a in args),
                                                  ",".join("%s=%s" % (k, d(v)) for k, v in sorted(kwargs.items())),
                                                  b.benchmark, b.deterministic, b.allow_tf32)


def load_tables():
    """traces/predict/cudnn-sm90.json (convolutions) and ops-sm90.json (other ops' scratch, output order),
    or the ones in $CAPTURE_FAKE_TABLES."""
    d = os.environ.get("CAPTURE_FAKE_TABLES") or os.path.join(HERE, "..", "traces", "predict")
    t = {"convs": {}, "scratch": {}, "order": {}}
    for f, ks in (("cudnn-sm90.json", ("convs",)), ("ops-sm90.json", ("scratch", "order"))):
        p = os.path.join(d, f)
        if os.path.exists(p):
            j = json.load(open(p))
            for k in ks:
                t[k] = j.get(k, {})
    return t


# ---------------------------------------------------------------- workloads (device-agnostic)

def _eager(cfg):
    for k in ("_attn_implementation", "attn_implementation"):
        try:
            setattr(cfg, k, "eager")
        except Exception:
            pass
    return cfg


def _gpt2(torch, dev, steps, ckpt=False, bf16=False, batch=8):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(_eager(GPT2Config()))
    if bf16:
        model = model.to(torch.bfloat16)
    model = model.to(dev)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False, "preserve_rng_state": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        s = int(torch.randint(128, 1025, (1,), generator=g))
        x = torch.randint(0, 50257, (batch, s), device=dev)
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x
    return model, opt


def w_gpt2_train(torch, dev):
    """HF GPT-2 small (124M, random init, eager attention), AdamW, batch 8, seq 128..1024, 6 steps."""
    return _gpt2(torch, dev, 6)


def w_gpt2_ckpt(torch, dev):
    """gpt2_train with gradient checkpointing (non-reentrant), batch 16."""
    return _gpt2(torch, dev, 4, ckpt=True, batch=16)


def w_gpt2_bf16(torch, dev):
    """gpt2_train with the model in bfloat16 (weights, grads, AdamW states in bf16; not autocast)."""
    return _gpt2(torch, dev, 6, bf16=True)


def w_bert_infer(torch, dev):
    """HF BERT-base (random init, eager attention), eval + no_grad, 30 batches of 1..64 x 16..512."""
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(_eager(BertConfig())).to(dev).eval()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(30):
            b = int(torch.randint(1, 65, (1,), generator=g))
            s = int(torch.randint(16, 513, (1,), generator=g))
            x = torch.randint(0, 30522, (b, s), device=dev)
            out = model(input_ids=x).last_hidden_state
            del out, x
    return model, None


def w_resnet50_train(torch, dev):
    """torchvision ResNet-50, batch 64, 224x224, SGD momentum 0.9, 4 steps, fp32."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    for _ in range(4):
        x = torch.randn(64, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (64,), device=dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
    return model, opt


def w_vit_train(torch, dev):
    """timm ViT-B/16 (TIMM_FUSED_ATTN=0: explicit attention), batch 32, AdamW, 4 steps, fp32."""
    os.environ["TIMM_FUSED_ATTN"] = "0"
    import timm
    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    for _ in range(4):
        x = torch.randn(32, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (32,), device=dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
    return model, opt


def w_llama_train(torch, dev):
    """A small LLaMA-style decoder (transformers LlamaConfig: 8 layers, hidden 1024, 16 heads, 4 KV
    heads, MLP 2816, vocab 32000; random init, eager attention), AdamW, batch 4 x 512, 4 steps."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = _eager(LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048))
    model = LlamaForCausalLM(cfg).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    for _ in range(4):
        x = torch.randint(0, 32000, (4, 512), device=dev)
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x
    return model, opt


def _unet(torch):
    nn = torch.nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self, ch=(32, 64, 128, 256)):
            super().__init__()
            self.downs = nn.ModuleList()
            i = 3
            for c in ch:
                self.downs.append(block(i, c))
                i = c
            self.mid = block(ch[-1], ch[-1] * 2)
            self.ups = nn.ModuleList()
            self.convs = nn.ModuleList()
            i = ch[-1] * 2
            for c in reversed(ch):
                self.ups.append(nn.ConvTranspose2d(i, c, 2, stride=2))
                self.convs.append(block(2 * c, c))
                i = c
            self.head = nn.Conv2d(ch[0], 1, 1)

        def forward(self, x):
            skips = []
            for d in self.downs:
                x = d(x)
                skips.append(x)
                x = torch.nn.functional.max_pool2d(x, 2)
            x = self.mid(x)
            for up, conv in zip(self.ups, self.convs):
                x = up(x)
                x = conv(torch.cat([x, skips.pop()], 1))
            return self.head(x)

    return UNet()


def w_unet_train(torch, dev):
    """A small hand-written UNet (4 levels, 32..512 channels, BatchNorm), batch 16, 3x256x256,
    BCE-with-logits, Adam, 4 steps, fp32."""
    torch.manual_seed(0)
    model = _unet(torch).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    for _ in range(4):
        x = torch.randn(16, 3, 256, 256, device=dev)
        y = torch.rand(16, 1, 256, 256, device=dev)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
    return model, opt


def w_kvserve(torch, dev):
    """capture.py's KV-cache serving loop (8 sequences decode together, K/V grown by torch.cat,
    24 requests of random prompt/output lengths), fp16, no_grad: the same code (capture.kvserve_loop)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import capture
    capture.kvserve_loop(torch, dev, 3)
    return None, None


WORKLOADS = {"gpt2_train": w_gpt2_train, "bert_infer": w_bert_infer, "resnet50_train": w_resnet50_train,
             "vit_train": w_vit_train, "llama_train": w_llama_train, "unet_train": w_unet_train,
             "kvserve": w_kvserve, "gpt2_ckpt": w_gpt2_ckpt, "gpt2_bf16": w_gpt2_bf16}
OPTIM_STATES = {"AdamW": 2, "Adam": 2, "SGD": 1}


# ---------------------------------------------------------------- the meta-device recorder

def make_recorder(torch):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.multiprocessing.reductions import StorageWeakRef

    class Recorder(TorchDispatchMode):
        def __init__(self, devtype):
            super().__init__()
            self.devtype = devtype
            self.live = {}       # storage cdata -> [id, weakref, nbytes]
            self.lines = []
            self.next_id = 1
            self.blas = set()    # streams with a cuBLAS workspace
            self.lt = set()
            self.ops = 0
            self.emulated = {}
            self.guessed = 0
            self.tables = load_tables()
            self.scratch = os.environ.get("CAPTURE_FAKE_SCRATCH") == "1"
            self.conv_hit = self.conv_miss = self.scratch_hit = 0
            self.missing = {}

        def replay_seq(self, ent, leaves, kind):
            """The real run's allocations inside the op, in its order: outputs (tracked) and transient
            workspaces (an alloc after "p unseen:KIND", freed where the real run freed it)."""
            ws = {}
            for ev in ent["seq"]:
                if ev[0] == "o" and ev[1] < len(leaves):
                    self.track(leaves[ev[1]])
                elif ev[0] == "w":
                    self.lines.append("p unseen:" + kind)
                    ws[ev[2]] = self.alloc(ev[1])
                elif ev[0] == "f" and ev[1] in ws:
                    self.lines.append("f %d" % ws.pop(ev[1]))
            for i in ws.values():  # (not freed inside the op in the real run: none seen)
                self.lines.append("f %d" % i)

        def alloc(self, n, stream=0):
            i = self.next_id
            self.next_id += 1
            self.lines.append("a %d %d %d" % (i, n, stream))
            return i

        def poll(self):
            dead = [k for k, v in self.live.items() if v[1].expired()]
            for k in dead:
                self.lines.append("f %d" % self.live.pop(k)[0])

        def track(self, t):
            if not isinstance(t, torch.Tensor) or t.device.type != self.devtype:
                return
            st = t.untyped_storage()
            n = st.nbytes()
            k = st._cdata
            old = self.live.get(k)
            if old is not None:
                if old[2] == n:
                    return
                # resized in place: the new memory is taken before the old is given back
                i = self.alloc(n)
                self.lines.append("f %d" % old[0])
                self.live[k] = [i, old[1], n]
                return
            if n == 0:
                return  # the caching allocator is not called for 0 bytes
            self.live[k] = [self.alloc(n), StorageWeakRef(st), n]

        def unseen(self, kind, stream=0):
            self.lines.append("p unseen:" + kind)
            self.alloc(UNSEEN[kind], stream)  # held by PyTorch's handle pool: never freed

        def call(self, func, args, kwargs):
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                name = func._schema.name.split("::")[-1]
                if not name.startswith("_foreach_"):
                    raise
                # a foreach op without a meta kernel: the same allocations, one tensor at a time
                # (the CUDA kernel allocates every output first, as this does)
                self.emulated[name] = self.emulated.get(name, 0) + 1
                base = name[len("_foreach_"):]
                op = getattr(torch.ops.aten, base)
                n = len(args[0])
                outs = []
                for i in range(n):
                    a = [x[i] if isinstance(x, (list, tuple)) else x for x in args]
                    kw = {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in kwargs.items()}
                    if base.rstrip("_") in ("addcdiv", "addcmul") and len(a) == 4:
                        kw["value"] = a.pop()
                    outs.append(op(*a, **kw))
                return None if name.endswith("_") else outs

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.ops += 1
            self.poll()
            name = func._schema.name.split("::")[-1]
            if name == "_fused_sdp_choice":
                q = args[0]
                # the backend PyTorch picks on sm_90 (sdp_utils.cpp): flash for 16-bit, efficient for fp32
                return 1 if q.dtype in (torch.float16, torch.bfloat16) else 2
            if name in ("_local_scalar_dense", "is_nonzero") and args[0].device.type == self.devtype:
                # a data-dependent branch (Tensor.item(), bool()): a meta tensor has no value; the
                # answer of the common case (True: transformers' "(mask == 0).all()" checks), counted
                self.guessed += 1
                return True if args[0].dtype == torch.bool else 0
            key = op_key(torch, name, args, kwargs) if (name in CONV_OPS or self.scratch) else None
            out = self.call(func, args, kwargs)
            leaves = tree_leaves(out)
            ent = None
            if name in CONV_OPS:
                ent = self.tables["convs"].get(key)
                if ent is None:
                    self.conv_miss += 1
                    self.missing[key] = self.missing.get(key, 0) + 1
                else:
                    self.conv_hit += 1
                    self.replay_seq(ent, leaves, "cudnn")
            elif self.scratch:
                ent = self.tables["scratch"].get(key)
                if ent is not None:
                    self.scratch_hit += 1
                    self.replay_seq(ent, leaves, "scratch")
            if ent is None:
                # the order in which the CUDA kernel allocates its outputs (the probe's, where one order was
                # seen: native_dropout allocates its mask before its output, Dropout.cu dropout_cuda())
                for i in self.tables["order"].get("%s/%d" % (name, len(leaves)), ORDER.get("%s/%d" % (name, len(leaves)), [])):
                    if i < len(leaves):
                        self.track(leaves[i])
            for t in leaves:
                self.track(t)
            on_dev = any(isinstance(t, torch.Tensor) and t.device.type == self.devtype for t in tree_leaves(args))
            if on_dev and name.rstrip("_") in BLAS_OPS:
                if 0 not in self.blas:
                    self.blas.add(0)
                    self.unseen("cublas-workspace")
                if name in LT_OPS and args[0].dim() == 1 and 0 not in self.lt:
                    self.lt.add(0)
                    self.unseen("cublaslt-workspace")
            return out

    return Recorder


def analytic(torch, model, opt, act_bytes, training):
    """accelerate-style: parameters + gradients + optimizer states + activations."""
    if model is None:
        return None
    p = sum(x.numel() * x.element_size() for x in model.parameters())
    b = sum(x.numel() * x.element_size() for x in model.buffers())
    g = p if training else 0
    o = p * OPTIM_STATES.get(type(opt).__name__, 0) if opt is not None else 0
    return {"params": p, "buffers": b, "grads": g, "optim": o, "activations": act_bytes, "total": p + b + g + o + act_bytes}


def act_hooks(torch, st):
    """Activations as simple estimators count them: the bytes of every leaf module's output in one
    forward (saved for backward when training), the largest forward of the run."""
    import torch.nn as nn
    st.update(cur=0, best=0, depth=0)

    def pre(m, i):
        if st["depth"] == 0:
            st["cur"] = 0
        st["depth"] += 1

    def post(m, i, o):
        st["depth"] -= 1
        if st["depth"] == 0:
            st["best"] = max(st["best"], st["cur"])

    def leaf(m, i, o):
        for t in (o if isinstance(o, (tuple, list)) else [o]):
            if isinstance(t, torch.Tensor):
                n = t.numel() * t.element_size()
                st["cur"] += n
                st["maxleaf"] = max(st.get("maxleaf", 0), n)

    # every module: leaves count their outputs; the outermost call opens and closes a forward
    hk = [nn.modules.module.register_module_forward_pre_hook(pre),
          nn.modules.module.register_module_forward_hook(post)]

    def leafhook(m, i, o):
        if not any(True for _ in m.children()):
            leaf(m, i, o)
    hk.append(nn.modules.module.register_module_forward_hook(leafhook))
    return hk


def fake_patches(torch):
    """Where PyTorch's composite code branches on the device being CUDA, take the CUDA branch."""
    import torch.nn.functional as F
    import torch.utils.checkpoint as ck
    # nn.Module.to('meta') would untie shared parameters (meta is not a "dense" backend for
    # _has_compatible_shallow_copy_type: a new Parameter per module); swapping keeps them tied, as
    # .to('cuda') does with param.data = ...
    torch.__future__.set_swap_module_params_on_conversion(True)
    # aten/src/ATen/native/Dropout.cpp: is_fused_kernel_acceptable() needs input.is_cuda(); on CUDA
    # dropout is native_dropout (output + a bool mask), elsewhere input * a float noise tensor
    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and not inplace and input.numel() > 0:
            return torch.ops.aten.native_dropout(input, p, True)[0]
        return orig(input, p, training, inplace)
    F.dropout = dropout
    # torch/utils/checkpoint.py looks up torch.<device> modules and autocast state by the inputs'
    # device type, which has none for "meta"; with preserve_rng_state=False CPU's are equivalent
    ck._infer_device_type = lambda *a, **k: "cpu"


def resolve(workload):
    """A built-in workload's name, or a Python file defining workload(torch, dev)."""
    if workload in WORKLOADS:
        return workload, WORKLOADS[workload]
    if workload.endswith(".py") and os.path.isfile(workload):
        import importlib.util
        spec = importlib.util.spec_from_file_location("user_workload", workload)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return os.path.basename(workload)[:-3], mod.workload
    sys.stderr.write("capture-fake.py: '%s' is neither a workload (%s) nor a .py file\n" % (workload, ", ".join(WORKLOADS)))
    sys.exit(64)


def run_fake(workload, out):
    workload, fn = resolve(workload)
    import torch
    assert not torch.cuda.is_available() or os.environ.get("CUDA_VISIBLE_DEVICES") != "", "a GPU is visible"
    gc.disable()
    fake_patches(torch)
    Recorder = make_recorder(torch)
    rec = Recorder("meta")
    st = {}
    hooks = act_hooks(torch, st)
    t0 = time.time()
    with rec:
        model, opt = fn(torch, "meta")
        rec.poll()
        res = (model, opt)
    for h in hooks:
        h.remove()
    training = opt is not None
    # inference: the largest layer's input and output; training: every layer's output is kept
    an = analytic(torch, model, opt, st.get("best", 0) if training else 2 * st.get("maxleaf", 0), training)
    del res
    # the end of the program: what is still referenced stays live (the GPU run's stats are read there too)
    hdr = ["#allocsim-trace 1", "#source: capture-fake.py %s (meta device, torch %s)" % (workload, torch.__version__),
           "#device: NVIDIA H200", "#device_total: 150109880320"]
    path = os.path.join(out, workload + ".trace.gz")
    with gzip.GzipFile(path + ".tmp", "wb", mtime=0) as f:
        f.write(("\n".join(hdr + rec.lines) + "\n").encode())
    os.replace(path + ".tmp", path)
    live = peak = 0
    sizes = {}
    for ln in rec.lines:
        if ln[0] == "a":
            _, i, n, _s = ln.split()
            sizes[i] = int(n)
            live += int(n)
            peak = max(peak, live)
        elif ln[0] == "f":
            live -= sizes.pop(ln.split()[1])
    meta = {"workload": workload, "torch": torch.__version__, "ops": rec.ops, "events": len(rec.lines),
            "peak_live_bytes": peak, "analytic": an, "cuda_available": torch.cuda.is_available(),
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "seconds": time.time() - t0, "emulated_foreach": rec.emulated,
            "data_dependent_guesses": rec.guessed, "cudnn_table_hits": rec.conv_hit, "cudnn_table_misses": rec.conv_miss,
            "cudnn_missing_keys": rec.missing, "scratch_table_hits": rec.scratch_hit}
    json.dump(meta, open(os.path.join(out, workload + ".fake.json"), "w"), indent=1)
    print(workload, "fake ok", meta["events"], "events", meta["seconds"], "s")


def run_real(workload, out):
    workload, fn = resolve(workload)
    import pickle
    import torch
    gc.disable()
    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=3_000_000)
    t0 = time.time()
    model, opt = fn(torch, "cuda")
    torch.cuda.synchronize()
    stats = dict(torch.cuda.memory_stats())
    free1, _ = torch.cuda.mem_get_info()
    snap = torch.cuda.memory._snapshot()
    with gzip.open(os.path.join(out, workload + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    meta = {"workload": workload, "torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0), "total_memory": total, "used_before_first_alloc": total - free0,
            "used_outside_allocator_at_end": total - free1 - stats["reserved_bytes.all.current"],
            "seconds": time.time() - t0, "memory_stats": stats}
    json.dump(meta, open(os.path.join(out, workload + ".real.json"), "w"), indent=1)
    print(workload, "real ok", stats["reserved_bytes.all.peak"], stats["num_device_alloc"])


# ---------------------------------------------------------------- the probe (on the GPU)

def run_probe(workload, out):
    """The workload on CUDA under a dispatch mode that notes, per op, the allocator's allocation and free
    counters before and after the call; the memory history (started first) then gives the allocations
    and frees inside each op, in order: which were its outputs (their storage's address), which were
    freed before it returned (workspaces, scratch). Writes W.probe.json: per op key with a transient
    allocation its sequence, and per op name the order in which the outputs were allocated."""
    workload, fn = resolve(workload)
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    gc.disable()
    torch.cuda.init()
    MAXE = 4_000_000
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=MAXE)
    stats = torch._C._cuda_memoryStats

    def counts():
        a = stats(0)["allocation"]["all"]
        return a["allocated"], a["freed"]

    calls = []

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name.split("::")[-1]
            a0, f0 = counts()
            res = func(*args, **kwargs)
            a1, f1 = counts()
            if a1 > a0:
                leaves = tree_leaves(res)
                outs = {}
                for i, t in enumerate(leaves):
                    if isinstance(t, torch.Tensor) and t.device.type == "cuda" and t.untyped_storage().nbytes():
                        outs.setdefault(t.untyped_storage().data_ptr(), i)
                calls.append((name, op_key(torch, name, args, kwargs), a0, f0, a1, f1, outs, len(leaves)))
            return res

    t0 = time.time()
    with Probe():
        model, opt = fn(torch, "cuda")
    torch.cuda.synchronize()
    end = counts()
    snap = torch.cuda.memory._snapshot()
    tr = snap["device_traces"][0]
    apos = [i for i, e in enumerate(tr) if e["action"] == "alloc"]
    fpos = [i for i, e in enumerate(tr) if e["action"] == "free_requested"]
    sane = len(apos) == end[0] and len(fpos) == end[1] and len(tr) < MAXE
    convs, scratch, order = {}, {}, {}
    for name, key, a0, f0, a1, f1, outs, nl in calls if sane else []:
        pos = sorted(apos[a0:a1] + fpos[f0:f1])
        seq, live, nw = [], {}, 0
        for i in pos:
            e = tr[i]
            if e["action"] == "alloc":
                if e["addr"] in outs:
                    seq.append(["o", outs[e["addr"]], e["size"]])
                else:
                    seq.append(["w", e["size"], nw])
                    live[e["addr"]] = nw
                    nw += 1
            elif e["addr"] in live:
                seq.append(["f", live.pop(e["addr"])])
        # an allocation neither an output nor freed inside the op is kept (cuBLAS's workspace): "k"
        for ev in seq:
            if ev[0] == "w" and ev[2] in live.values():
                ev[0] = "k"
        perm = [ev[1] for ev in seq if ev[0] == "o"]
        if len(perm) > 1:
            o = order.setdefault("%s/%d" % (name, nl), {})
            o[repr(perm)] = o.get(repr(perm), 0) + 1
        if not any(ev[0] == "w" for ev in seq) and name not in CONV_OPS:
            continue
        tab = convs if name in CONV_OPS else scratch
        ent = tab.get(key)
        if ent is None:
            tab[key] = {"op": name, "seq": seq, "workspaces": [ev[1] for ev in seq if ev[0] == "w"], "calls": 1, "variants": 0,
                        "workloads": [workload]}
        else:
            ent["calls"] += 1
            if ent["seq"] != seq:
                ent["variants"] += 1
    json.dump({"workload": workload, "torch": torch.__version__, "cuda": torch.version.cuda,
               "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(0), "sane": sane,
               "trace_entries": len(tr), "counters_at_end": end, "ops_with_allocations": len(calls),
               "seconds": time.time() - t0, "convs": convs, "scratch": scratch, "order": order},
              open(os.path.join(out, workload + ".probe.json"), "w"))
    print(workload, "probe ok" if sane else "probe INSANE", len(convs), "convs", len(scratch), "scratch keys")


def merge_probes(pdir, out):
    """cudnn-sm90.json (every convolution key) and ops-sm90.json (other ops' scratch; output order) from
    the W.probe.json in PDIR."""
    convs, scratch, order, meta = {}, {}, {}, {}
    for f in sorted(os.listdir(pdir)):
        if not f.endswith(".probe.json"):
            continue
        j = json.load(open(os.path.join(pdir, f)))
        if not j["sane"]:
            print("skipped (its counters and its history disagree):", f)
            continue
        meta = {k: j[k] for k in ("torch", "cuda", "cudnn", "device")}
        for tab, src in ((convs, j["convs"]), (scratch, j["scratch"])):
            for k, v in src.items():
                if k in tab:
                    tab[k]["calls"] += v["calls"]
                    tab[k]["variants"] += v["variants"] + (tab[k]["seq"] != v["seq"])
                    tab[k]["workloads"] += v["workloads"]
                else:
                    tab[k] = v
        for k, v in j["order"].items():
            o = order.setdefault(k, {})
            for p, n in v.items():
                o[p] = o.get(p, 0) + n
    # an order the capture follows: one seen, with every output (else the capture's own)
    follow = {k: json.loads(next(iter(v))) for k, v in order.items() if len(v) == 1}
    src = "aten/src/ATen/native/cudnn/Conv_v8.cpp (v2.11.0): run_single_conv() allocates the workspace from the caching allocator per call"
    os.makedirs(out, exist_ok=True)
    json.dump(dict(meta, source=src, how="capture-fake.py probe: allocation counters around each op + the memory history",
                   n=len(convs), convs=dict(sorted(convs.items()))), open(os.path.join(out, "cudnn-sm90.json"), "w"), indent=0)
    json.dump(dict(meta, how="capture-fake.py probe", n_scratch=len(scratch), scratch=dict(sorted(scratch.items())),
                   order=dict(sorted(follow.items())), order_seen=dict(sorted(order.items()))),
              open(os.path.join(out, "ops-sm90.json"), "w"), indent=0)
    print("merged", len(convs), "convs,", sum(1 for v in convs.values() if v["workspaces"]), "with a workspace;",
          len(scratch), "scratch keys;", len(follow), "output orders")


def run_all(out, names, timeout=int(os.environ.get("CAPTURE_FAKE_TIMEOUT", "150")), modes=("fake", "real")):
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "runs.log"), "a")

    def one(mode, w):
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if mode == "fake":
            env["CUDA_VISIBLE_DEVICES"] = ""
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), mode, w, out], env=env, capture_output=True,
                               text=True, timeout=timeout)
            rc, txt = p.returncode, (p.stdout + p.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            rc, txt = "timeout", str(e)
        return "== %s %s rc=%s %.1fs\n%s\n" % (mode, w, rc, time.time() - t0, txt)

    with cf.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(one, "fake", w) for w in names if "fake" in modes]
        # the GPU runs three at a time (each process has its own allocator: its stats are its own)
        with cf.ThreadPoolExecutor(3) as gx:
            futs += [gx.submit(one, m, w) for m in ("real", "probe") if m in modes for w in names]
            for f in cf.as_completed(futs):
                log.write(f.result())
                log.flush()


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    mode = sys.argv[1]
    if mode == "list":
        for k, f in WORKLOADS.items():
            print("%-16s %s" % (k, " ".join(f.__doc__.split())))
        return 0
    if mode in ("all", "fakeall", "realall", "probeall"):
        modes = {"all": ("fake", "real"), "fakeall": ("fake",), "realall": ("real",)}.get(mode, ("probe",))
        run_all(sys.argv[2], sys.argv[3:] or list(WORKLOADS), modes=modes)
        return 0
    if mode == "merge" and len(sys.argv) == 4:
        merge_probes(sys.argv[2], sys.argv[3])
        return 0
    if mode not in ("fake", "real", "probe") or len(sys.argv) != 4:
        sys.stderr.write("capture-fake.py: usage: fake|real WORKLOAD OUTDIR (workloads: %s)\n" % ", ".join(WORKLOADS))
        return 64
    os.makedirs(sys.argv[3], exist_ok=True)
    {"fake": run_fake, "real": run_real, "probe": run_probe}[mode](sys.argv[2], sys.argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
