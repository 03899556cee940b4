// What the VULKAN device shows a test about itself.
#pragma once

namespace mg {

// Vulkan handles the VULKAN device has made and not yet released (its instance, device, command
// pool, each program's pipeline objects, each buffer and its memory). A construction that throws
// part-way leaves this where it was before it began.
int vulkan_live_handles();

} // namespace mg
