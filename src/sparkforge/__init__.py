"""sparkforge: Python API over the sparkforge.stack Ansible collection."""

__version__ = "0.1.0"
