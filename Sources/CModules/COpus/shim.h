#pragma once
#include <opus/opus.h>
