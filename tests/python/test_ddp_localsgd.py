"""shoal.ddp with local SGD (2 ranks, period 4) converges; models agree after final(). (ddp_common.py)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_common  # noqa: E402

if __name__ == "__main__":
    ddp_common.run("localsgd")
