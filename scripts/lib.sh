# Shared helpers for the project's scripts (sourced, not run).

# setup_build DIR [meson options...]: configure DIR, or reconfigure it when it exists.
setup_build() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

# jobs: how many compile jobs (all cores; CI has 2).
jobs() { nproc 2>/dev/null || echo 2; }
