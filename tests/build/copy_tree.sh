# Sourced by the build checks (fresh_macros.sh, clang_build.sh): copies the
# tree as git sees it (tracked files and new files not ignored, so no build
# outputs of the checkout) into an existing directory; without git, all of it.
copy_tree() { # top, destination
	if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$1" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$2"
	else
		cp -a "$1/." "$2"
	fi
}
