# Sourced by gpu_check.sh and gpu_study.sh: cuDNN and NCCL may live only in python's nvidia-* wheels
# (PyTorch's) on a GPU machine. wheel_file NAME prints the first file called NAME among those
# packages; bundle_library_path DIR puts DIR/lib and, for each library DIR/bin/*'s binaries need that
# neither the system nor the bundle has, the wheel folder holding it into LD_LIBRARY_PATH, and sets
# MISSING_LIBS to the names of any still missing. Call it directly, not in $( ): a subshell's
# LD_LIBRARY_PATH is lost.
wheel_file() {
  python3 - "$1" <<'PY' 2>/dev/null
import pathlib, sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
for root in nvidia.__path__:
    for f in sorted(pathlib.Path(root).rglob(sys.argv[1])):
        print(f)
        sys.exit(0)
PY
}

bundle_library_path() {
  export LD_LIBRARY_PATH="$1/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local lib f
  for lib in $(ldd "$1"/bin/* | awk '/not found/ { print $1 }' | sort -u); do
    f=$(wheel_file "$lib")
    [ -n "$f" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$f")"
  done
  MISSING_LIBS=$(ldd "$1"/bin/* | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
}
