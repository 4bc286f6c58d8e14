#!/usr/bin/env python3
"""Writes the gradient tensor lists used by `artune autotune --fusion`.

Usage: python3 configs/fusion/generate.py   (rewrites resnet50.json and bert_base.json beside it)

Each list holds one entry per trainable variable, in variable-creation order
(the order TF's group_by_size sees the gradients), with the variable's name and
shape; sizes are counted in elements ("unit": "elements") of float32.

- resnet50: ResNet-50 v1 as in tf_cnn_benchmarks (He et al. 2016, table 1):
  convolutions without bias, each followed by batch norm (trainable gamma and
  beta; the moving statistics are not gradients), bottleneck blocks [3, 4, 6, 3]
  with widths 64/128/256/512 and expansion 4, a projection shortcut in the first
  block of each stage, and a 1000-way dense layer. 161 tensors, 25,557,032
  parameters (the figure torchvision reports; moving statistics excluded).
- bert_base: BERT-base uncased (Devlin et al. 2019): vocabulary 30522, hidden
  768, 12 layers, 12 heads, intermediate 3072, 512 positions, 2 token types;
  embeddings with layer norm, per layer query/key/value/output projections,
  attention and output layer norms, the feed-forward pair, and the pooler.
  199 tensors, 109,482,240 parameters.
"""
import json
import os


def resnet50():
    tensors = []

    def conv(name, k, cin, cout):
        tensors.append((f"{name}/kernel", [k, k, cin, cout]))

    def bn(name, c):
        tensors.append((f"{name}/gamma", [c]))
        tensors.append((f"{name}/beta", [c]))

    conv("conv1", 7, 3, 64)
    bn("bn_conv1", 64)
    cin = 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512]), start=2):
        for b in range(blocks):
            prefix = f"res{stage}{chr(ord('a') + b)}"
            conv(f"{prefix}_branch2a", 1, cin, width)
            bn(f"bn{stage}{chr(ord('a') + b)}_branch2a", width)
            conv(f"{prefix}_branch2b", 3, width, width)
            bn(f"bn{stage}{chr(ord('a') + b)}_branch2b", width)
            conv(f"{prefix}_branch2c", 1, width, 4 * width)
            bn(f"bn{stage}{chr(ord('a') + b)}_branch2c", 4 * width)
            if b == 0:
                conv(f"{prefix}_branch1", 1, cin, 4 * width)
                bn(f"bn{stage}{chr(ord('a') + b)}_branch1", 4 * width)
            cin = 4 * width
    tensors.append(("fc1000/kernel", [2048, 1000]))
    tensors.append(("fc1000/bias", [1000]))
    return tensors


def bert_base():
    h, inter, layers = 768, 3072, 12
    tensors = [
        ("bert/embeddings/word_embeddings", [30522, h]),
        ("bert/embeddings/token_type_embeddings", [2, h]),
        ("bert/embeddings/position_embeddings", [512, h]),
        ("bert/embeddings/LayerNorm/gamma", [h]),
        ("bert/embeddings/LayerNorm/beta", [h]),
    ]
    for i in range(layers):
        p = f"bert/encoder/layer_{i}"
        for proj in ("query", "key", "value"):
            tensors.append((f"{p}/attention/self/{proj}/kernel", [h, h]))
            tensors.append((f"{p}/attention/self/{proj}/bias", [h]))
        tensors.append((f"{p}/attention/output/dense/kernel", [h, h]))
        tensors.append((f"{p}/attention/output/dense/bias", [h]))
        tensors.append((f"{p}/attention/output/LayerNorm/gamma", [h]))
        tensors.append((f"{p}/attention/output/LayerNorm/beta", [h]))
        tensors.append((f"{p}/intermediate/dense/kernel", [h, inter]))
        tensors.append((f"{p}/intermediate/dense/bias", [inter]))
        tensors.append((f"{p}/output/dense/kernel", [inter, h]))
        tensors.append((f"{p}/output/dense/bias", [h]))
        tensors.append((f"{p}/output/LayerNorm/gamma", [h]))
        tensors.append((f"{p}/output/LayerNorm/beta", [h]))
    tensors.append(("bert/pooler/dense/kernel", [h, h]))
    tensors.append(("bert/pooler/dense/bias", [h]))
    return tensors


def elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write(path, model, description, tensors):
    doc = {
        "model": model,
        "description": description,
        "type": "float32",
        "unit": "elements",
        "tensor_count": len(tensors),
        "total_elements": sum(elements(s) for _, s in tensors),
        "tensors": [{"name": n, "shape": s, "elements": elements(s)} for n, s in tensors],
    }
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for key in ("model", "description", "type", "unit", "tensor_count", "total_elements"):
            f.write(f"  {json.dumps(key)}: {json.dumps(doc[key])},\n")
        f.write('  "tensors": [\n')
        rows = [f"    {json.dumps(t)}" for t in doc["tensors"]]
        f.write(",\n".join(rows))
        f.write("\n  ]\n}\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    write(os.path.join(here, "resnet50.json"), "resnet50",
          "ResNet-50 v1 trainable variables (tf_cnn_benchmarks layout), written by configs/fusion/generate.py",
          resnet50())
    write(os.path.join(here, "bert_base.json"), "bert_base",
          "BERT-base uncased trainable variables (encoder + pooler), written by configs/fusion/generate.py",
          bert_base())


if __name__ == "__main__":
    main()
