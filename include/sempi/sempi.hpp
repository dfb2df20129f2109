#pragma once
/// \file
/// sempi's C++ API: include this one header.

#include "sempi/communicator.hpp"
#include "sempi/constants.hpp"
#include "sempi/datatype.hpp"
#include "sempi/environment.hpp"
#include "sempi/error.hpp"
#include "sempi/message.hpp"
#include "sempi/op.hpp"
#include "sempi/request.hpp"
#include "sempi/status.hpp"
#include "sempi/version.hpp"
