// The CUDA target: runs a verified CUDA artifact on a GPU. The module is loaded once (cubin
// for the GPU's architecture, else PTX compiled by the driver) and the weights uploaded
// once; per session (one per concurrent run) a stream, a device arena sized by the plan,
// and the whole step list captured into a CUDA Graph that every later run replays.
#pragma once

#include <memory>

#include "runtime/executor.h"

namespace kiln::runtime::cuda {

/// Loads a verified cuda-sm_XX artifact onto GPU `options.cuda_device`. Without a driver, a
/// GPU, or code this GPU runs, the error says which.
Result<std::unique_ptr<Executor>> load_executor(const format::ArtifactView& view, Signature signature,
                                                const Options& options);

}  // namespace kiln::runtime::cuda
