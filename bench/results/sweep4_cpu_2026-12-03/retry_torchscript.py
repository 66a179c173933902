"""retry_torchscript.py OUT_DIR NAME...: exports the named models of sweep4_models.py with
PyTorch's TorchScript exporter, for those whose torch.export fails."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep4_models as s

out = sys.argv[1]
for n in sys.argv[2:]:
    s.em.MODELS[n] = (s.M[n][0], "torchscript")
    try:
        s.em.export(n, out)
    except Exception as e:
        print(f"{n}: TS EXPORT FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
