// The guest-state fields of each segment register (SDM Vol. 3C, "Guest Register
// State"), shared by VM entry (loading) and VM exit (saving).
#pragma once
#include "cpu/registers.h"
#include "cpu/vmx/vmcs.h"

namespace vmxsim {

struct GuestSegmentFields {
  VmcsField Selector, Base, Limit, AccessRights;
};

/// ES, CS, SS, DS, FS, GS in SegReg order.
inline constexpr GuestSegmentFields kGuestSegFields[kNumSegRegs] = {
    {VmcsField::GuestEsSelector, VmcsField::GuestEsBase, VmcsField::GuestEsLimit,
     VmcsField::GuestEsAccessRights},
    {VmcsField::GuestCsSelector, VmcsField::GuestCsBase, VmcsField::GuestCsLimit,
     VmcsField::GuestCsAccessRights},
    {VmcsField::GuestSsSelector, VmcsField::GuestSsBase, VmcsField::GuestSsLimit,
     VmcsField::GuestSsAccessRights},
    {VmcsField::GuestDsSelector, VmcsField::GuestDsBase, VmcsField::GuestDsLimit,
     VmcsField::GuestDsAccessRights},
    {VmcsField::GuestFsSelector, VmcsField::GuestFsBase, VmcsField::GuestFsLimit,
     VmcsField::GuestFsAccessRights},
    {VmcsField::GuestGsSelector, VmcsField::GuestGsBase, VmcsField::GuestGsLimit,
     VmcsField::GuestGsAccessRights},
};
inline constexpr GuestSegmentFields kGuestLdtrFields = {
    VmcsField::GuestLdtrSelector, VmcsField::GuestLdtrBase, VmcsField::GuestLdtrLimit,
    VmcsField::GuestLdtrAccessRights};
inline constexpr GuestSegmentFields kGuestTrFields = {
    VmcsField::GuestTrSelector, VmcsField::GuestTrBase, VmcsField::GuestTrLimit,
    VmcsField::GuestTrAccessRights};

/// Access-rights bits the VMCS defines (SDM Vol. 3C, Table "Format of Access Rights"):
/// 7:0, 15:12 and the unusable bit 16; bits 11:8 and 31:17 are reserved (saved as 0).
inline constexpr uint32_t kAccessRightsMask = 0x1f0ff;

} // namespace vmxsim
