export { admitUpdate } from './admit-update.js'
export type { Admission, AdmissionPolicy, AdmissionRefusalCode } from './admit-update.js'
export { ClientBindings, type ClientBinding } from './client-bindings.js'
