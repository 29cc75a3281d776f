import subprocess
import sys

HEAVY = ["ray", "torch", "transformers", "vllm", "mlflow", "boto3", "kubernetes", "pyarrow", "lm_eval"]


def test_import_auditkit_ray_loads_no_heavy_sdk():
    code = (
        "import sys, auditkit_ray, auditkit_ray.cli, auditkit_ray.config, auditkit_ray.backends;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported at import time: {out.stdout.strip()}"


def test_validate_command_loads_no_heavy_sdk(root):
    code = (
        "import sys; from auditkit_ray.cli import main;"
        f"rc = main(['validate', {str(root / 'examples/echo.yaml')!r}]);"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules)); sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout + "\n" and out.stdout.strip().endswith("HEAVY="), out.stdout
