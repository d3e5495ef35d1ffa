// singa/core/layout.h: the memory layouts a recorded graph may keep a 4-d activation block in.
//
//   // A kernel that can read x and write y in the channel-blocked layout says so when submitted:
//   dev->Exec({.id = OpId::kConv2dForward, .reads = {x, W}, .writes = {y},
//              .layouts = {.reads = 0b01, .writes = 0b1}}, fn);
//   // ... and, when it runs, looks at what the graph chose:
//   if (x->mem_layout() == MemLayout::kChannels16) { /* read x as nChw16c */ }
//
// A block is plain (row-major NCHW) unless a graph's build decides otherwise (Graph: layouts).
// MemLayout::kChannels16 is oneDNN's nChw16c: element (n, c, h, w) of an (N, C, H, W) block with
// C a multiple of 16 lies at ((n * C/16 + c/16) * H * W + h * W + w) * 16 + c % 16, so the block
// has the same size in both layouts (the graph never pads channels: the memory plan is unchanged)
// and an elementwise kernel that treats its operands as flat arrays of one shape computes the same
// result in either, as long as all of them share it. A block with H * W == 1 is stored alike in both
// layouts and is never tagged. Eager mode never tags anything.
#pragma once

#include <cstdint>

namespace singa {

enum class MemLayout : uint8_t { kPlain = 0, kChannels16 = 1 };

/// What an operation tells a graph about the layouts its kernel accepts (Device::Exec).
struct LayoutHooks {
  uint32_t reads = 0;   ///< bit i set: reads[i] may be stored channel-blocked
  uint32_t writes = 0;  ///< bit i set: writes[i] may
  /// The flagged operands must all share one layout (batch norm, pooling, elementwise ops);
  /// false: each may have its own (a convolution reorders whatever differs from its primitive's).
  bool one_layout = false;

  bool any() const { return reads != 0 || writes != 0; }
  /// Every operand, one layout: a kernel that sees its operands as flat arrays of one shape.
  static LayoutHooks Flat() { return LayoutHooks{~0u, ~0u, true}; }
};

}  // namespace singa
