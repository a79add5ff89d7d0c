"""ResNet-18 and MobileNetV3-Small in funcgrad.nn, with torchvision's module names, so their
state dicts load torchvision checkpoints (converted to safetensors) unchanged:

    model = resnet18(num_classes=1000)
    model.load_state_dict(funcgrad.load("resnet18.safetensors"))

Both use PyTorch's default initializations (Kaiming normal for convolutions, as torchvision).
"""
import math

import funcgrad.nn as nn
import funcgrad.nn.functional as F


# --- ResNet -------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if downsample is not None:
            self.downsample = downsample
        else:
            self.downsample = None

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet layout (conv1, bn1, layer1..4, fc) with BasicBlocks."""

    def __init__(self, layers=(2, 2, 2, 2), num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.get_parameter("weight"), mode="fan_out",
                                        nonlinearity="relu")

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x).reshape(x.shape[0], -1)
        return self.fc(x)


def resnet18(num_classes=1000):
    """ResNet-18 with torchvision's parameter names. Example: ``resnet18(10)(jnp.ones((1, 3, 32, 32)))``."""
    return ResNet((2, 2, 2, 2), num_classes)


# --- MobileNetV3-Small ----------------------------------------------------------------------------
def _make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new < 0.9 * v:
        new += divisor
    return new


class ConvBNAct(nn.Sequential):
    """torchvision's Conv2dNormActivation: children "0" conv, "1" BatchNorm, "2" activation."""

    def __init__(self, cin, cout, k=3, stride=1, groups=1, act=nn.Hardswish):
        layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups,
                            bias=False),
                  nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return x * s


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, expanded, cout, use_se, act, stride):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(ConvBNAct(cin, expanded, 1, act=act))
        layers.append(ConvBNAct(expanded, expanded, k, stride=stride, groups=expanded, act=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4)))
        layers.append(ConvBNAct(expanded, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res_connect else y


_SMALL = [  # in, kernel, expanded, out, SE, activation, stride
    (16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1)]


class MobileNetV3(nn.Module):
    """torchvision's MobileNetV3 layout: ``features`` (Sequential), ``avgpool``, ``classifier``."""

    def __init__(self, config=_SMALL, last_channel=1024, num_classes=1000, dropout=0.2):
        super().__init__()
        layers = [ConvBNAct(3, config[0][0], 3, stride=2, act=nn.Hardswish)]
        for cin, k, exp, cout, se, act, s in config:
            layers.append(InvertedResidual(cin, k, exp, cout, se,
                                           nn.ReLU if act == "RE" else nn.Hardswish, s))
        last_conv = 6 * config[-1][3]
        layers.append(ConvBNAct(config[-1][3], last_conv, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last_conv, last_channel), nn.Hardswish(),
                                        nn.Dropout(dropout), nn.Linear(last_channel,
                                                                       num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.get_parameter("weight"), mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.get_parameter("bias"))
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.get_parameter("weight"), 0.0, 0.01)
                nn.init.zeros_(m.get_parameter("bias"))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(x.reshape(x.shape[0], -1))


def mobilenet_v3_small(num_classes=1000, dropout=0.2):
    """MobileNetV3-Small with torchvision's parameter names. Example: ``mobilenet_v3_small(10)``."""
    return MobileNetV3(_SMALL, 1024, num_classes, dropout)


del math, F
