# lit configuration for kiln's text tests: `# RUN: kiln opt %s ... | FileCheck %s`.
import os

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".kir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "lit")

# run_lit.sh puts kiln, FileCheck and not first on PATH.
config.environment["PATH"] = os.environ["KILN_LIT_PATH"] + os.pathsep + "/usr/bin:/bin"
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "cli", "Inputs")))
