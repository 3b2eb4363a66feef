"""One training-mode forward and backward, then an eval-mode forward, of pytorch-cifar's models,
written against ``torch``: test_pytorch_cifar_programs.py runs it on torch and, through the
import alias (run_program.py), on ember, and compares what the two write.

    python run_program.py torch|ember cifar_models_forward_backward.py MODELS_DIR WORK \
        [--float64] NAME...

MODELS_DIR holds pytorch-cifar's ``models`` package; each NAME is a key of ``MODELS``. The input
(WORK/input.npz: ``x`` (2, 3, 32, 32) float32 and the output cotangent ``g``) comes from the
test. The first backend to run a NAME (torch) builds the model under ``torch.manual_seed(0)``
and writes its state dict to WORK/weights_NAME.npz; the other loads it from there. Each
backend writes WORK/BACKEND_NAME.npz: ``out`` (train-mode output), ``grad.<param>`` (the
gradients of ``(out * g).sum()``; empty where a parameter has none), ``state.<key>`` (the state dict after the step, batch-norm
running statistics included) and ``eval_out`` (eval-mode output, no grad). With ``--float64``
(after a float32 run has written the weights) the model, its weights and the input are cast to
float64 and the file is WORK/BACKEND64_NAME.npz: the reference that shows how far float32
rounding alone moves each number. NumPy files only: nothing is unpickled."""
import importlib
import os
import sys

import numpy as np
import torch

# name: (models module, constructor expression in that module's namespace); each model as
# small as its constructor allows (the fixed architectures as they are)
MODELS = {
    "LeNet": ("lenet", "LeNet()"),
    "VGG11": ("vgg", "VGG('VGG11')"),
    "ResNet_basic": ("resnet", "ResNet(BasicBlock, [1, 1, 1, 1])"),
    "ResNet_bottleneck": ("resnet", "ResNet(Bottleneck, [1, 1, 1, 1])"),
    "PreActResNet_basic": ("preact_resnet", "PreActResNet(PreActBlock, [1, 1, 1, 1])"),
    "PreActResNet_bottleneck": ("preact_resnet",
                                "PreActResNet(PreActBottleneck, [1, 1, 1, 1])"),
    "GoogLeNet": ("googlenet", "GoogLeNet()"),
    "DenseNet": ("densenet", "DenseNet(Bottleneck, [2, 2, 2, 2], growth_rate=8)"),
    "ResNeXt": ("resnext", "ResNeXt(num_blocks=[1, 1, 1], cardinality=2, bottleneck_width=8)"),
    "MobileNet": ("mobilenet", "MobileNet()"),
    "MobileNetV2": ("mobilenetv2", "MobileNetV2()"),
    "ShuffleNet": ("shufflenet",
                   "ShuffleNet({'out_planes': [40, 80, 160], 'num_blocks': [1, 2, 1], "
                   "'groups': 2})"),
    "ShuffleNetV2": ("shufflenetv2", "ShuffleNetV2(0.5)"),
    "SENet_basic": ("senet", "SENet(BasicBlock, [1, 1, 1, 1])"),
    "SENet_preact": ("senet", "SENet(PreActBlock, [1, 1, 1, 1])"),
    "RegNetX_200MF": ("regnet", "RegNetX_200MF()"),
    "RegNet_se": ("regnet",
                  "RegNet({'depths': [1, 1, 1, 1], 'widths': [24, 56, 152, 368], "
                  "'strides': [1, 1, 2, 2], 'group_width': 8, 'bottleneck_ratio': 1, "
                  "'se_ratio': 0.25})"),
    "DLA": ("dla", "DLA()"),
    "SimpleDLA": ("dla_simple", "SimpleDLA()"),
    "DPN": ("dpn",
            "DPN({'in_planes': (32, 64, 96, 192), 'out_planes': (64, 128, 256, 512), "
            "'num_blocks': (1, 1, 1, 1), 'dense_depth': (8, 16, 12, 32)})"),
    # dropout and drop-connect off: their random masks are not comparable across frameworks
    "EfficientNet": ("efficientnet",
                     "EfficientNet({'num_blocks': [1, 1, 1, 1, 1, 1, 1], "
                     "'expansion': [1, 6, 6, 6, 6, 6, 6], "
                     "'out_channels': [16, 24, 40, 80, 112, 192, 320], "
                     "'kernel_size': [3, 3, 5, 3, 5, 5, 3], 'stride': [1, 2, 2, 2, 1, 2, 1], "
                     "'dropout_rate': 0.0, 'drop_connect_rate': 0.0})"),
    "PNASNet_A": ("pnasnet", "PNASNet(CellA, num_cells=1, num_planes=16)"),
    "PNASNet_B": ("pnasnet", "PNASNet(CellB, num_cells=1, num_planes=16)"),
}


def build(name):
    module, expression = MODELS[name]
    namespace = vars(importlib.import_module(f"models.{module}"))
    return eval(expression, dict(namespace))


def run(name, work, backend, float64=False):
    weights = os.path.join(work, f"weights_{name}.npz")
    torch.manual_seed(0)
    net = build(name)
    if os.path.exists(weights):
        with np.load(weights, allow_pickle=False) as f:
            net.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
    elif float64:
        raise SystemExit(f"{weights}: run float32 first, it writes the weights")
    else:
        np.savez(weights, **{k: v.numpy() for k, v in net.state_dict().items()})
    with np.load(os.path.join(work, "input.npz"), allow_pickle=False) as f:
        x, g = torch.from_numpy(f["x"]), torch.from_numpy(f["g"])
    if float64:
        net, x, g, backend = net.double(), x.double(), g.double(), backend + "64"
    net.train()
    out = net(x)
    (out * g).sum().backward()
    result = {"out": out.detach().numpy()}
    for k, p in net.named_parameters():      # a parameter the loss does not reach: no grad
        result[f"grad.{k}"] = np.array([]) if p.grad is None else p.grad.numpy()
    for k, v in net.state_dict().items():
        result[f"state.{k}"] = v.numpy()
    net.eval()
    with torch.no_grad():
        result["eval_out"] = net(x).numpy()
    np.savez(os.path.join(work, f"{backend}_{name}.npz"), **result)
    print(f"{name}: {sum(p.numel() for p in net.parameters())} parameters, output "
          f"{tuple(out.shape)}", flush=True)


def main(argv):
    models_dir, work, names = argv[0], argv[1], argv[2:]
    float64 = names[:1] == ["--float64"]
    sys.path.insert(0, models_dir)
    backend = "torch" if torch.__name__ == "torch" else "ember"    # the alias gives ember
    for name in names[float64:]:
        run(name, work, backend, float64)


if __name__ == "__main__":
    main(sys.argv[1:])
