# Managed by sparkforge (role runtime_env); loaded at interpreter start by sparkforge_runtime.pth.
"""Apply SPARKFORGE_SDPA_DISABLE (comma-separated: flash, mem_efficient, cudnn) when torch is imported.

Costs nothing when the variable is empty and never imports torch itself.
"""
import os
import sys

_DISABLE = [name.strip() for name in os.environ.get("SPARKFORGE_SDPA_DISABLE", "").split(",") if name.strip()]


def _apply(torch):
    for name in _DISABLE:
        try:
            getattr(torch.backends.cuda, "enable_%s_sdp" % name)(False)
        except Exception as exc:  # a hook must never break an import
            sys.stderr.write("sparkforge: cannot switch off SDPA backend %r: %s\n" % (name, exc))


if _DISABLE:
    import importlib.abc
    import importlib.machinery

    class _TorchHook(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            original = spec.loader.exec_module

            def exec_module(module):
                original(module)
                _apply(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _TorchHook())
