#pragma once
#include <opusfile.h>
