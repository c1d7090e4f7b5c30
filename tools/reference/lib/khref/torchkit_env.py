"""khref.torchkit_env — what a torch build computes with (its BLAS and oneDNN, from the build's own
configuration report), for the records of the PyTorch reference and of Keras 3 on the torch backend."""
import re


def libraries(torch):
    """e.g. "BLAS MKL 2024.2, oneDNN v3.7.1, OpenMP 201511" (what torch.__config__.show() reports)."""
    try:
        cfg = torch.__config__.show()
    except Exception as e:  # a build without the report still runs; say why the field is thin
        return "configuration unavailable (%s)" % e
    parts = []
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    if m:
        parts.append("BLAS %s" % m.group(1))
    m = re.search(r"Intel\(R\) oneAPI Math Kernel Library Version ([0-9.]+)", cfg) or \
        re.search(r"Intel\(R\) Math Kernel Library Version ([0-9.]+)", cfg)
    if m:
        parts.append("MKL %s" % m.group(1))
    m = re.search(r"(?:oneDNN|MKL-DNN) v([0-9.]+)", cfg)
    if m:
        parts.append("oneDNN v%s" % m.group(1))
    m = re.search(r"OpenMP (\d+)", cfg)
    if m:
        parts.append("OpenMP %s" % m.group(1))
    return ", ".join(parts) or "no BLAS/oneDNN named in torch.__config__.show()"
