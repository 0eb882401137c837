#pragma once
#include <mpg123.h>
