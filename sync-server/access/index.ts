export { AccessService, assignmentScope, membershipOf, ACCESS_SEGMENT } from './access-service.js'
