#!/usr/bin/python3
"""An independent reference of the Hugging Face Llama family (llama, qwen2), written from
transformers' modeling code as documentation (LlamaRMSNorm, rotate_half, apply_rotary_pos_emb,
repeat_kv, eager attention), with PyTorch alone: no cairn code, no transformers, no safetensors
package. Debian's python3-torch.

    llama_reference.py write DIR TYPE SEED [DTYPES]
                                             a random checkpoint as transformers lays it out:
                                             config.json, two safetensors files (shuffled order),
                                             model.safetensors.index.json; its tensors BF16 and
                                             F32 in turn (DTYPES mixed, the default), or all F32
                                             (f32) or all F16 (f16)
    llama_reference.py logits DIR TOKENS     the logits of TOKENS (1,5,9,2) as JSON, float32
    llama_reference.py compare A B           A and B ({"logits": ...}) agree within 1e-4 of the
                                             largest logit; exit 1 otherwise
    llama_reference.py same DIR_A DIR_B      the two checkpoints hold the same tensors, names and
                                             values (as float32) exactly; exit 1 otherwise
    llama_reference.py add-inv-freq DIR      adds each layer's rotary_emb.inv_freq (F32) to DIR's
                                             last file and its index, as transformers before 4.31
                                             saved them
    llama_reference.py layout DIR            DIR is laid out as transformers' from_pretrained
                                             reads it: config.json of the type's keys; one
                                             model.safetensors, or model-0000i-of-0000n files and
                                             an index that maps each tensor to its file; each
                                             file's __metadata__ {"format": "pt"}; exactly the
                                             type's tensor names and shapes, in torch_dtype;
                                             exit 1 naming each departure
"""
import re
import json
import os
import random
import struct
import sys

import torch

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def read_tensors(path):
    """Every tensor of a safetensors file, name -> tensor in its own dtype, in the file's order."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype, width = DTYPES[info["dtype"]]
        raw = bytearray(data[8 + size + begin : 8 + size + end])
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


def read_safetensors(path):
    return {name: t.to(torch.float32) for name, t in read_tensors(path).items()}


def write_safetensors(path, tensors):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors:
        code = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[t.dtype]
        raw = t.contiguous().view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.contiguous().numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load(directory):
    config = json.load(open(os.path.join(directory, "config.json")))
    index = os.path.join(directory, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(directory, name)))
    return config, weights


# --- the model, as transformers computes it -------------------------------------------------


def rms_norm(hidden, weight, eps):
    hidden = hidden.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    return weight * (hidden * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotary(config, positions, head_dim):
    inv_freq = 1.0 / (config.get("rope_theta", 10000.0) ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions[:, None].float() * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def repeat_kv(hidden, n_rep):
    heads, length, dim = hidden.shape
    if n_rep == 1:
        return hidden
    return hidden[:, None, :, :].expand(heads, n_rep, length, dim).reshape(heads * n_rep, length, dim)


def logits(config, w, tokens):
    model_type = config["model_type"]
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden // heads
    eps = config["rms_norm_eps"]
    qkv_bias = model_type == "qwen2" or config.get("attention_bias", False)
    o_bias = model_type == "llama" and config.get("attention_bias", False)
    ids = torch.tensor(tokens)
    length = len(tokens)
    x = w["model.embed_tokens.weight"][ids]
    cos, sin = rotary(config, torch.arange(length), head_dim)
    mask = torch.full((length, length), float("-inf")).triu(1)
    for layer in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = h @ w[p + "self_attn." + name + ".weight"].T
            if qkv_bias:
                y = y + w[p + "self_attn." + name + ".bias"]
            return y.view(length, n, head_dim).transpose(0, 1)  # [heads, length, head_dim]

        q, k, v = proj("q_proj", heads), proj("k_proj", kv_heads), proj("v_proj", kv_heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scores = q @ k.transpose(1, 2) / head_dim**0.5 + mask
        attention = torch.softmax(scores, dim=-1, dtype=torch.float32)
        out = (attention @ v).transpose(0, 1).reshape(length, heads * head_dim)
        out = out @ w[p + "self_attn.o_proj.weight"].T
        if o_bias:
            out = out + w[p + "self_attn.o_proj.bias"]
        x = x + out
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return x @ head.T


# --- a random checkpoint in transformers' layout --------------------------------------------


def write(directory, model_type, seed, dtypes="mixed"):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tied = model_type == "qwen2"
    config = {
        "architectures": ["Qwen2ForCausalLM" if model_type == "qwen2" else "LlamaForCausalLM"],
        "model_type": model_type, "vocab_size": 61, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": tied, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
        "use_cache": True, "initializer_range": 0.02, "transformers_version": "4.40.0",
    }
    if model_type == "llama":
        config.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1, "rope_scaling": None})
    else:
        config.update({"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 2,
                       "attention_dropout": 0.0, "rope_scaling": None})
    h, kv, i, v = 64, 32, 96, 61
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not tied:
        shapes["lm_head.weight"] = (v, h)
    for layer in range(2):
        p = "model.layers.%d." % layer
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                       p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                       p + "mlp.down_proj.weight": (h, i)})
        if model_type == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (h,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
    names = list(shapes)
    rng.shuffle(names)  # any order, any file
    tensors = []
    for n, name in enumerate(names):
        t = torch.randn(shapes[name]) * (1.0 if name.endswith("norm.weight") else 0.2)
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * t
        dtype = {"mixed": torch.bfloat16 if n % 2 else torch.float32, "f32": torch.float32, "f16": torch.float16}[dtypes]
        tensors.append((name, t.to(dtype)))
    os.makedirs(directory, exist_ok=True)
    half = len(tensors) // 2
    files = {"model-00001-of-00002.safetensors": tensors[:half], "model-00002-of-00002.safetensors": tensors[half:]}
    weight_map = {}
    for file, part in files.items():
        write_safetensors(os.path.join(directory, file), part)
        weight_map.update({name: file for name, _ in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
              open(os.path.join(directory, "model.safetensors.index.json"), "w"))
    json.dump(config, open(os.path.join(directory, "config.json"), "w"), indent=2)


# --- what from_pretrained expects of a directory -----------------------------------------------

ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}
DTYPE_NAMES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def expected_tensors(config):
    """Every tensor of the model config.json describes, name -> shape, as transformers names them."""
    h, heads = config["hidden_size"], config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    d = config.get("head_dim") or h // heads
    i, v = config["intermediate_size"], config["vocab_size"]
    qkv_bias = config["model_type"] == "qwen2" or config.get("attention_bias", False)
    o_bias = config["model_type"] == "llama" and config.get("attention_bias", False)
    out = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not config.get("tie_word_embeddings", False):
        out["lm_head.weight"] = [v, h]
    for layer in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        out.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                    p + "self_attn.q_proj.weight": [heads * d, h], p + "self_attn.k_proj.weight": [kv * d, h],
                    p + "self_attn.v_proj.weight": [kv * d, h], p + "self_attn.o_proj.weight": [h, heads * d],
                    p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h],
                    p + "mlp.down_proj.weight": [h, i]})
        if qkv_bias:
            out.update({p + "self_attn.q_proj.bias": [heads * d], p + "self_attn.k_proj.bias": [kv * d],
                        p + "self_attn.v_proj.bias": [kv * d]})
        if o_bias:
            out[p + "self_attn.o_proj.bias"] = [h]
    return out


def read_header(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def layout(directory):
    problems = []
    config = json.load(open(os.path.join(directory, "config.json")))
    model_type = config.get("model_type")
    if model_type not in ARCHITECTURES:
        return ["config.json: model_type %r is not llama, mistral or qwen2" % model_type]
    if config.get("architectures") != [ARCHITECTURES[model_type]]:
        problems.append("config.json: architectures is %r" % config.get("architectures"))
    for key in ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings",
                "tie_word_embeddings", "hidden_act", "torch_dtype"]:
        if key not in config:
            problems.append("config.json: no %s" % key)
    if config.get("hidden_act") != "silu":
        problems.append("config.json: hidden_act is %r" % config.get("hidden_act"))
    dtype = DTYPE_NAMES.get(config.get("torch_dtype"))
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        weight_map = json.load(open(index_path)).get("weight_map", {})
        files = sorted(set(weight_map.values()))
        numbered = [re.fullmatch(r"model-(\d{5})-of-(\d{5})\.safetensors", f) for f in files]
        if not all(numbered):
            problems.append("index: files not named model-0000i-of-0000n.safetensors: %s" % files)
        elif [int(m.group(1)) for m in numbered] != list(range(1, len(files) + 1)) or \
                {int(m.group(2)) for m in numbered} != {len(files)}:
            problems.append("index: files not numbered 1 to %d: %s" % (len(files), files))
        if os.path.exists(os.path.join(directory, "model.safetensors")):
            problems.append("both model.safetensors and an index")
    else:
        files = ["model.safetensors"]
        weight_map = None
    found = {}
    for name in files:
        header = read_header(os.path.join(directory, name))
        if header.get("__metadata__", {}).get("format") != "pt":
            problems.append("%s: __metadata__ is %r, not format pt" % (name, header.get("__metadata__")))
        for tensor, info in header.items():
            if tensor == "__metadata__":
                continue
            if weight_map is not None and weight_map.get(tensor) != name:
                problems.append("%s: holds %s, which the index maps to %s" % (name, tensor, weight_map.get(tensor)))
            if info["dtype"] != dtype:
                problems.append("%s: %s is %s, config.json's torch_dtype %s" % (name, tensor, info["dtype"],
                                                                                config.get("torch_dtype")))
            found[tensor] = info["shape"]
    expected = expected_tensors(config)
    for tensor in sorted(set(expected) | set(found)):
        if tensor not in found:
            problems.append("no tensor %s" % tensor)
        elif tensor not in expected:
            problems.append("a tensor %s the model does not have" % tensor)
        elif found[tensor] != expected[tensor]:
            problems.append("%s has shape %s, the model's is %s" % (tensor, found[tensor], expected[tensor]))
    if weight_map is not None and set(weight_map) != set(found):
        problems.append("the index maps tensors no file holds: %s" % sorted(set(weight_map) - set(found)))
    if not problems:
        print("%s: %d tensors in %d file(s), %s, as transformers lays them out" % (model_type, len(found), len(files),
                                                                                   config["torch_dtype"]))
    return problems


def add_inv_freq(directory):
    config, _ = load(directory)
    index_path = os.path.join(directory, "model.safetensors.index.json")
    index = json.load(open(index_path))
    last = sorted(set(index["weight_map"].values()))[-1]
    path = os.path.join(directory, last)
    tensors = list(read_tensors(path).items())
    d = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    inv_freq = 1.0 / (config.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2).float() / d))
    for layer in range(config["num_hidden_layers"]):
        name = "model.layers.%d.self_attn.rotary_emb.inv_freq" % layer
        tensors.append((name, inv_freq.clone()))
        index["weight_map"][name] = last
    write_safetensors(path, tensors)
    json.dump(index, open(index_path, "w"))


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "write":
        write(argv[2], argv[3], int(argv[4]), *argv[5:])
    elif len(argv) == 4 and argv[1] == "logits":
        config, weights = load(argv[2])
        tokens = [int(t) for t in argv[3].split(",")]
        print(json.dumps({"logits": logits(config, weights, tokens).tolist()}))
    elif len(argv) == 4 and argv[1] == "same":
        (_, a), (_, b) = load(argv[2]), load(argv[3])
        if sorted(a) != sorted(b):
            print("other tensors: %s" % sorted(set(a) ^ set(b)))
            return 1
        differing = [n for n in a if a[n].shape != b[n].shape or not torch.equal(a[n], b[n])]
        print("%d tensors, %d differ" % (len(a), len(differing)))
        return 0 if not differing else 1
    elif len(argv) == 3 and argv[1] == "add-inv-freq":
        add_inv_freq(argv[2])
    elif len(argv) == 3 and argv[1] == "layout":
        problems = layout(argv[2])
        for p in problems:
            print(p)
        return 1 if problems else 0
    elif len(argv) == 4 and argv[1] == "compare":
        a = torch.tensor(json.load(open(argv[2]))["logits"])
        b = torch.tensor(json.load(open(argv[3]))["logits"])
        if a.shape != b.shape:
            print("shapes differ: %s and %s" % (list(a.shape), list(b.shape)))
            return 1
        difference = (a - b).abs().max().item() / a.abs().max().item()
        print("largest difference, relative to the largest logit: %.3g" % difference)
        return 0 if difference <= 1e-4 else 1
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
