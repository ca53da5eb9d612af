import { transportContract } from './transport-contract.js'

transportContract('sync')
transportContract('mux')
