# Stand-in for the pip bootstrap script ansible-test downloads (its host is not reachable here).
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
