#!/usr/bin/python3
"""Writes tests/data/onnx_external/: a small model (y = x @ W + b, then relu) whose two weights are
stored outside the .onnx file, in one external data file, as large models are saved; and the
expected output for a fixed input, computed with NumPy. Uses Debian's python3-onnx (ONNX 1.12)
and python3-numpy. Run from anywhere:
    /usr/bin/python3 tests/data/make_onnx_external.py
"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
from onnx.external_data_helper import convert_model_to_external_data

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_external")
os.makedirs(out, exist_ok=True)
rng = np.random.RandomState(22)
W = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal((3,)).astype(np.float32)
x = rng.standard_normal((2, 4)).astype(np.float32)

graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["xwb"]),
     helper.make_node("Relu", ["xwb"], ["y"])],
    "external_weights",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, producer_name="make_onnx_external.py", opset_imports=[helper.make_opsetid("", 13)])
# every initializer (size_threshold 0) into weights.bin, at its own offset
convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
onnx.save_model(model, os.path.join(out, "model.onnx"))
onnx.checker.check_model(os.path.join(out, "model.onnx"))
with open(os.path.join(out, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(x, "x").SerializeToString())
with open(os.path.join(out, "output_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(np.maximum(x @ W + b, 0), "y").SerializeToString())
print("wrote", out)

# the same model pointing outside its folder: a loader must refuse it, not read ../weights.bin
for t in model.graph.initializer:
    for kv in t.external_data:
        if kv.key == "location":
            kv.value = "../onnx_external/weights.bin"
onnx.save_model(model, os.path.join(out, "model_outside.onnx"))
