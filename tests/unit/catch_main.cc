// The one Catch2 main, compiled once and shared by every unit test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
