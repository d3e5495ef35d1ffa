// singa/core/layout.h: the memory layouts a recorded graph may keep a 4-d activation block in.
//
//   // A kernel that can read x and write y in a kept layout says which when submitted:
//   dev->Exec({.id = id, .reads = {x, W}, .writes = {y},                // a convolution
//              .layouts = {.reads = 0b01, .writes = 0b1}}, fn);              // nChw16c
//   dev->Exec({..., .layouts = {.reads_last = 0b01, .writes_last = 0b1}}, fn);  // NHWC
//   // ... and, when it runs, looks at what the graph chose:
//   if (x->mem_layout() == MemLayout::kChannelsLast) { /* read x as NHWC */ }
//
// A block is plain (row-major NCHW) unless a graph's build decides otherwise (Graph: layouts).
// Two kept layouts, both oneDNN's, of an (N, C, H, W) block with C a multiple of 16:
//   MemLayout::kChannels16 (nChw16c): element (n, c, h, w) at
//     ((n * C/16 + c/16) * H * W + h * W + w) * 16 + c % 16; what fp32 convolutions compute in
//     on AVX-512.
//   MemLayout::kChannelsLast (NHWC, oneDNN's acdb): at ((n * H + h) * W + w) * C + c; what
//     bfloat16 convolutions compute in on AMX / AVX512_BF16 cores.
// A block has the same size in every layout (the graph never pads channels: the memory plan is
// unchanged), and an elementwise kernel that treats its operands as flat arrays of one shape
// computes the same result in any of them, as long as all of them share it. A block with
// H * W == 1 is stored alike in all layouts and is never tagged. Eager mode never tags anything.
#pragma once

#include <cstdint>

namespace singa {

enum class MemLayout : uint8_t { kPlain = 0, kChannels16 = 1, kChannelsLast = 2 };

/// What an operation tells a graph about the layouts its kernel accepts (Device::Exec).
struct LayoutHooks {
  uint32_t reads = 0;   ///< bit i set: reads[i] may be stored in kChannels16
  uint32_t writes = 0;  ///< bit i set: writes[i] may
  /// The flagged operands must all share one layout (batch norm, pooling, elementwise ops);
  /// false: each may have its own (a convolution reorders whatever differs from its primitive's).
  bool one_layout = false;
  uint32_t reads_last = 0;   ///< bit i set: reads[i] may be stored in kChannelsLast
  uint32_t writes_last = 0;  ///< bit i set: writes[i] may
  /// The one-layout operands are flat arrays of one shape (elementwise ops): operands of other
  /// shapes (a broadcast) keep all of them plain. Otherwise only the layout is shared (pooling's
  /// x and y differ in H and W).
  bool flat = false;

  bool any() const { return (reads | writes | reads_last | writes_last) != 0; }
  /// Every operand, one layout, any of them: a kernel that sees its operands as flat arrays of
  /// one shape.
  static LayoutHooks Flat() { return LayoutHooks{~0u, ~0u, true, ~0u, ~0u, true}; }
  /// The same operands in either kept layout (a kernel with a path for each).
  static LayoutHooks Both(uint32_t reads, uint32_t writes, bool one_layout) {
    return LayoutHooks{reads, writes, one_layout, reads, writes};
  }
};

}  // namespace singa
