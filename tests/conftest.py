import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# tests/fixtures holds stand-in source trees, some with their own test suites (the PyTorch
# fixture's test/ for the acceptance tests): data for the tests here, not tests to collect.
collect_ignore = ["fixtures"]
