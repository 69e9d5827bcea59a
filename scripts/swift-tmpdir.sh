# Sourced by the scripts that run the Swift compiler (build.sh, test.sh).
# swift-frontend writes the expansions of macros to
# $TMPDIR/swift-generated-sources, for debuggers. Where that directory
# belongs to another user (a shared /tmp in which root built first) it
# cannot, and writes them into its working directory instead — into the
# checkout, under names made of stray bytes, which javac then trips on.
# Such a user's builds get a temporary directory of their own, which the
# caller removes at exit: swift_private_tmpdir names it (empty otherwise).
swift_private_tmpdir=
if [ -e "${TMPDIR:-/tmp}/swift-generated-sources" ] && [ ! -w "${TMPDIR:-/tmp}/swift-generated-sources" ]; then
    swift_private_tmpdir=$(mktemp -d)
    echo "${0##*/}: ${TMPDIR:-/tmp}/swift-generated-sources is another user's: TMPDIR=$swift_private_tmpdir for this run" >&2
    export TMPDIR=$swift_private_tmpdir
fi
