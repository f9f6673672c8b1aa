/* The library's version and the git revision it was built from. */
#include "kernbench/common.h"
#include "kernbench/version.h"
#include "base/gitrev.h"

KB_API const char *kb_version(void)
{
	return KB_VERSION_STRING;
}

KB_API unsigned kb_version_hex(void)
{
	return KB_VERSION_HEX;
}

KB_API const char *kb_git_revision(void)
{
	return KB_GIT_REVISION;
}
