// The layout of a 4-D value stored between convolutions in a graph whose activations are
// channels-last (LowerOptions::channels_last_activations).
#pragma once
#include "lower/lowering.h"

namespace ember {

// Strides for storing `t` (4-D, static sizes): channels-last, unless the value reads its
// float inputs along its last dim of size > 1 rather than along dim 1 (weighted by the bytes of each
// affine load), in which case eager's `strides`. A value that is a convolution output permuted to
// [N, H, W, C] (ConvNeXt's LayerNorm over channels, Swin's windows) is already laid out
// with its channels last; its "channels-last" strides would make dim 2 the unit-stride
// one, and the LayerNorm's reduction then read its 96 channels 56 elements apart (a 6%
// of copy bandwidth kernel on an H100, and the kernel that wrote them strided too).
Dims activation_strides(const TensorIR& t, const Dims& strides);

}  // namespace ember
