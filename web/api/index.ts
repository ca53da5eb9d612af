export { HttpApi, HttpError, NetworkError, nextVersion, type AuthResult, type ChangePage, type Me } from './http-client.js'
