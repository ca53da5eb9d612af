export { AccessService, assignmentLabel, assignmentScope, membershipOf, ACCESS_SEGMENT } from './access-service.js'
