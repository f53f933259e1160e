// The style sheet and script of the `vmxsim trace report` page (trace/report.h), kept
// apart from the C++ that fills the page.
#pragma once

namespace vmxsim::trace::detail {

extern const char kReportCss[];
/// Draws the plots from the JSON block #vmxsim-data; sets the body's
/// data-vmxsim-status to "drawn" when it has finished.
extern const char kReportScript[];

} // namespace vmxsim::trace::detail
