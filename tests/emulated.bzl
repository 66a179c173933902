"""The GPU tier (cuda_gpu_test) on kiln's CUDA emulator (tests/cuda_emulator)."""

def emulated_gpu_test(name, cases):
    """cuda_gpu_test's `cases` (Catch2 test specs, ANDed) run on the emulator.

    Args:
      name: the test's name.
      cases: Catch2 test specs, quoted for the shell.
    """
    native.sh_test(
        name = name,
        size = "medium",
        timeout = "long",
        srcs = ["cuda_emulated_test.sh"],
        args = [
            "$(rootpath //tests/cuda_emulator:libcuda_emulator.so)",
            "$(rootpath :cuda_gpu_test)",
            "-d",
            "yes",
        ] + cases,
        data = [
            ":cuda_gpu_test",
            "//tests/cuda_emulator:libcuda_emulator.so",
        ] + native.glob(["lit/**/*.kir"]),
    )
